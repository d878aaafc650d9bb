"""``monarch.remote``: a Python function run on every rank of a mesh.

    @monarch.remote(propagate=lambda x, w: x @ w)
    def matmul(x, w):
        return x @ w

    with mesh.activate():
        y = matmul(x, w)          # a distributed tensor, one shard per rank

The call becomes one ``call_function`` instruction naming the function
(``python:<module>:<qualname>``); each worker runs it on its local shards
(``remote_exec``). The controller never runs it for real: the result
shapes come from ``propagate`` --

* a callable: run on fake tensors (``FakeTensorMode``) with the arguments;
* ``"cached"``: the first call runs the function once on the first rank of
  the mesh and fetches its result metadata; later calls reuse it;
* ``"inspect"``: the function returns nothing (it runs for its effects);
* None (default): the function itself, run on fake tensors.

As in Monarch, the function may also be named by its import path,
``remote("pkg.module.fn", propagate=...)``: each worker imports it (a
``torch.`` path is looked up attribute by attribute from ``torch``), and the
controller need not have it (propagate None then means ``"cached"``).

The function is also an endpoint, as in Monarch: under ``mesh.activate()``,
``fn.call(*args, **kwargs)`` (a Future of a ValueMesh of each rank's return
value, whatever it is), ``call_one``, ``choose``, ``stream``, ``broadcast``
and ``monarch.actor.send(fn, args, kwargs, port=port)`` run it on the ranks
of the active mesh as an endpoint of a hidden actor on each of their procs
(``remote_actor.py``); distributed tensor arguments arrive as each rank's
local shard.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..actor.actor_mesh import Endpoint, internal_mesh
from ..actor.value_mesh import ValueMesh
from ..common import pickling
from ..common.errors import usage
from ..common.future import Future
from ..common.location import user_location
from . import remote_exec, tracing
from .checks import check_use
from .core import HAS_CUDA, TensorCore, device_of, fake_mode, new_dtensor
from .dispatch import to_fake
from .modes import active_mesh, local
from .remote_actor import MESH_NAME, RemoteFunctions
from .streams import get_active_stream
from .tracing import sink_for

Propagate = Union[None, str, Callable[..., Any]]


_PROPAGATE_WORDS = ("cached", "inspect")


def _by_path(path: str) -> Tuple[str, Callable[..., Any]]:
    """The call_function name of ``remote("pkg.module.fn")`` and what the
    controller calls for it: the function if it imports here, else a stand-in
    that says it does not (the workers import it)."""
    parts = path.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise ValueError(f"remote takes a function or its import path 'pkg.module.fn', "
                         f"got {path!r}")
    module, qualname = ("torch", ".".join(parts[1:])) if parts[0] == "torch" else (
        ".".join(parts[:-1]), parts[-1])
    name = f"{remote_exec.PREFIX}{module}:{qualname}"
    try:
        return name, remote_exec.resolve(name)
    except (ImportError, AttributeError):
        pass

    def unresolved(*args: Any) -> Any:
        raise RuntimeError(f"remote function {path!r} does not import in the controller; it "
                           "runs only on the workers, with distributed tensors or under "
                           "mesh.activate()")

    unresolved.__qualname__ = unresolved.__name__ = qualname
    unresolved.__module__ = module
    return name, unresolved


class Remote:
    """A function callable on distributed tensors (see module docstring)."""

    def __init__(self, fn: Union[str, Callable[..., Any]], propagate: Propagate = None):
        if isinstance(propagate, str) and propagate not in _PROPAGATE_WORDS:
            raise ValueError(f"propagate must be a callable, 'cached', 'inspect' or None, not "
                             f"{propagate!r}" + (" (Monarch's 'mocked' is not supported)"
                                                 if propagate == "mocked" else ""))
        if propagate is not None and not isinstance(propagate, str) and not callable(propagate):
            raise TypeError(f"propagate must be a callable, 'cached', 'inspect' or None, not "
                            f"{propagate!r}")
        self._identity: Optional[Tuple[str, bytes]] = None
        if isinstance(fn, str):
            name, fn = _by_path(fn)
            self._identity = (name, b"")
            if propagate is None:
                propagate = "cached"
        if not callable(fn):
            raise TypeError(f"remote takes a function or its import path, got {fn!r}")
        if propagate == "inspect":
            propagate = _returns_nothing
        qualname = getattr(fn, "__qualname__", "") or getattr(fn, "__name__", "fn")
        self._fn = fn
        self._propagate = propagate
        self._qualname = qualname
        self._cached = CachedMeta(lambda sink, a, results, mesh, stream, loc: sink.call_function(
            remote_exec.META_PREFIX + self.name[len(remote_exec.PREFIX):], a, results, mesh,
            stream, loc, self.definition))
        self.__name__ = getattr(fn, "__name__", "remote")
        self.__qualname__ = qualname
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__

    @property
    def _monarch_remote_fn(self) -> Callable[..., Any]:
        return self._fn

    def _identify(self) -> Tuple[str, bytes]:
        """(name, by-value definition) as the workers find the function:
        decided at the first call, when a decorated function is already its
        module's attribute. An importable function goes by module and name;
        one of the controller's __main__ or a local one by value (a
        cloudpickle named by its digest: each worker unpickles it once)."""
        if self._identity is None:
            fn = self._fn
            if pickling.by_reference(fn):
                self._identity = (f"{remote_exec.PREFIX}{fn.__module__}:{self._qualname}", b"")
            else:
                definition = pickling.dumps_bytes(fn)
                digest = hashlib.sha1(definition).hexdigest()[:20]
                self._identity = (f"{remote_exec.PREFIX}@{digest}:{self._qualname}",
                                  definition)
        return self._identity

    @property
    def name(self) -> str:
        return self._identify()[0]

    @property
    def definition(self) -> bytes:
        return self._identify()[1]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return call_distributed(
            f"remote function {self.__qualname__}", self._fn, self._propagate, args, kwargs,
            None,
            lambda sink, a, results, mesh, stream, loc: sink.call_function(
                self.name, a, results, mesh, stream, loc, self.definition),
            probe=self._cached.meta)

    def rref(self, *args: Any, **kwargs: Any) -> Any:
        """Monarch's name for the call itself: distributed tensor results."""
        return self(*args, **kwargs)

    # -- the adverbs: an endpoint on the active mesh (remote_actor.py) ------------------
    def call(self, *args: Any, **kwargs: Any) -> "Future[ValueMesh]":
        """Every rank of the active mesh runs the function; a Future of the
        ValueMesh (the active mesh's shape) of what each returned."""
        return self._endpoint("call").call(*args, **kwargs)

    def call_one(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """The only rank of the active mesh (an error if it has more)."""
        return self._endpoint("call_one").call_one(*args, **kwargs)

    def choose(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """One rank of the active mesh, round robin."""
        return self._endpoint("choose").choose(*args, **kwargs)

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[Future[Any]]:
        """Every rank; one Future per rank, the k-th completing with the
        k-th reply to arrive."""
        return self._endpoint("stream").stream(*args, **kwargs)

    def broadcast(self, *args: Any, **kwargs: Any) -> None:
        """Every rank, no reply; an exception stops that rank's hidden actor
        and is a supervision event, as for an actor endpoint."""
        self._endpoint("broadcast").broadcast(*args, **kwargs)

    def _monarch_endpoint(self) -> Endpoint:
        """What ``monarch.actor.send(fn, ...)`` (and ``Accumulator``) calls."""
        return self._endpoint("send")

    def _endpoint(self, adverb: str) -> "_FunctionEndpoint":
        mesh = active_mesh()
        if mesh is None:
            raise ValueError("Calling a 'remote' monarch function requires an active proc_mesh "
                             f"(`with proc_mesh.activate():`): {self.__qualname__}.{adverb}() "
                             "found none")
        if tracing.current() is not None:
            raise NotImplementedError(
                f"{self.__qualname__}.{adverb}() inside monarch.trace: a traced program has no "
                "actors to run it; call the function itself (distributed tensor results), or "
                "the adverb eagerly")
        with local():
            actors = internal_mesh(mesh, MESH_NAME, RemoteFunctions)
        return _FunctionEndpoint(actors, self)


class _FunctionEndpoint(Endpoint):
    """A remote function's adverbs: the endpoint ``RemoteFunctions.run`` of
    the hidden actors of the active mesh's procs, each message naming the
    function (its name and by-value definition before the call's own
    arguments). The messages are pickled under :func:`local`: inside
    ``mesh.activate()`` that work is the frontend's, not the mesh's."""

    def __init__(self, actors: Any, fn: Remote):
        super().__init__(actors, "run")
        self._lead = (fn.name, fn.definition)
        self._what = f"remote function {fn.__qualname__}"

    def _describe(self) -> str:
        return self._what

    def _frames(self, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                port: Any = None) -> Tuple[List[Any], int]:
        with local():
            return super()._frames(self._lead + (args, kwargs), {}, port)

    def _per_actor(self, args: Tuple[Any, ...], kwargs: Dict[str, Any], port: Any = None,
                   one: bool = False) -> Optional[List[Tuple[Any, List[Any], int]]]:
        _check_shards(self._what, self._mesh._proc_mesh, args, kwargs)
        with local():
            return super()._per_actor(self._lead + (args, kwargs), {}, port, one)

    def call_one(self, *args: Any, **kwargs: Any) -> Future[Any]:
        n = len(self._mesh)
        if n != 1:
            raise ValueError(f"call_one of {self._what} on the active mesh of {n} ranks "
                             f"({self._mesh._view.shape_string()}); it needs exactly one "
                             "(activate a slice of one rank)")
        return super().call_one(*args, **kwargs)

    def rref(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self._what}: for distributed tensor results call the function "
                        "itself")

    def __repr__(self) -> str:
        return f"<Endpoint {self._what} on {self._mesh._view.shape_string()}>"


def _check_shards(what: str, mesh: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    """A distributed tensor argument of an adverb must have a shard on every
    rank of the active mesh (it is each rank's local shard that goes)."""
    for t in tree_flatten((list(args), dict(kwargs)))[0]:
        if not isinstance(t, TensorCore):
            continue
        if t._mesh._session is not mesh._session:
            raise ValueError(f"{what}: a distributed tensor argument lives on "
                             f"{t._mesh._describe()} of other processes than the active mesh "
                             f"{mesh._describe()}")
        view = t._mesh._view
        missing = [r for r in mesh._view.ranks() if view.coords_of(r) is None]
        if missing:
            raise ValueError(f"{what}: a distributed tensor argument on {t._mesh._describe()} "
                             f"has no shard on ranks {missing} of the active mesh "
                             f"{mesh._describe()}")


Meta = Tuple[bool, List[Tuple[torch.dtype, Tuple[int, ...], torch.device]]]


def _returns_nothing(*args: Any, **kwargs: Any) -> None:
    """propagate="inspect": the function has no results."""
    return None


class CachedMeta:
    """``propagate="cached"``: result metadata learned by running the function
    once on the first rank of the mesh (``emit_probe`` issues a call that
    returns the metadata as one int64 tensor, ``remote_exec.encode_meta``),
    kept per argument shapes, dtypes and other values."""

    def __init__(self, emit_probe: Callable[..., None]):
        self._emit_probe = emit_probe
        self._known: Dict[Any, Meta] = {}

    def __len__(self) -> int:
        return len(self._known)

    def meta(self, args: Tuple[Any, ...], mesh: Any, stream: Any, loc: str) -> Meta:
        key = self._key(args)
        hit = self._known.get(key)
        if hit is None:
            hit = self._probe(args, mesh, stream, loc)
            self._known[key] = hit
        return hit

    @staticmethod
    def _key(args: Tuple[Any, ...]) -> Any:
        def key(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                return ("T", x.dtype, tuple(x.shape))
            return ("V", repr(x))

        return tuple(key(a) for a in tree_flatten(list(args))[0])

    def _probe(self, args: Tuple[Any, ...], mesh: Any, stream: Any, loc: str) -> Meta:
        probe_mesh = mesh.slice(**{name: 0 for name in mesh.names})
        with fake_mode:
            fake = torch.empty((0,), dtype=torch.int64)
        probe = new_dtensor(fake, probe_mesh, stream)
        session = mesh._session
        self._emit_probe(session.eager, list(args), [probe], probe_mesh, stream, loc)
        fut = session.fetch(probe._ref.id, probe_mesh._view, session.stream_id(stream.ir_name),
                            loc)
        encoded = fut.get().tolist()
        del probe
        single = encoded[0] == -1
        count = 1 if single else encoded[0]
        metas, i = [], 1
        for _ in range(count):
            dtype = remote_exec.DTYPES[encoded[i]]
            device = torch.device("cuda" if encoded[i + 1] == 1 else "cpu")
            ndim = encoded[i + 2]
            metas.append((dtype, tuple(encoded[i + 3:i + 3 + ndim]), device))
            i += 3 + ndim
        return single, metas


def _fake_meta(what: str, fn: Callable[..., Any], args: Tuple[Any, ...],
               dts: List[TensorCore]) -> Meta:
    """Result metadata from running ``fn`` on fake tensors. A result on the
    fakes' CPU while the inputs live on CUDA (a controller without a GPU,
    where every fake is on the CPU) lives where the inputs do."""
    try:
        fake_args = tree_map(to_fake, list(args))
        with fake_mode:
            out = fn(*fake_args)
    except (RuntimeError, ValueError, TypeError, IndexError) as e:
        raise type(e)(f"propagate of {what}: {e}") from None
    single, tensors = remote_exec.flatten(out, what)
    inputs = next((device_of(t) for t in dts if device_of(t) != t.device), None)
    metas = []
    for t in tensors:
        device = inputs if inputs is not None and t.device.type == "cpu" else t.device
        metas.append((t.dtype, tuple(t.shape), device))
    return single, metas


def call_distributed(what: str, fn: Callable[..., Any], propagate: Propagate,
                     args: Tuple[Any, ...], kwargs: Dict[str, Any], mesh: Any,
                     emit: Callable[..., None], skip_self: bool = False,
                     probe: Optional[Callable[..., Meta]] = None) -> Any:
    """Issues one instruction running ``fn`` on every rank of ``mesh`` (None:
    the active mesh, else the mesh of the distributed arguments) and returns
    its results as distributed tensors. Shared by ``remote`` (call_function)
    and the ``rref`` adverb (call_actor, ``skip_self``: ``fn`` is a method)."""
    signature = inspect.signature(fn)
    bound = signature.bind(None, *args, **kwargs) if skip_self else signature.bind(*args, **kwargs)
    if bound.kwargs:
        raise TypeError(f"{what}: keyword-only arguments {sorted(bound.kwargs)} cannot be "
                        "sent; make them positional")
    args = tuple(bound.args[1:] if skip_self else bound.args)
    flat, _ = tree_flatten(list(args))
    dts = [a for a in flat if isinstance(a, TensorCore)]
    if mesh is None:
        mesh = active_mesh()
        if mesh is None:
            if not dts:
                return fn(*args)  # nothing distributed: an ordinary call
            mesh = dts[0]._mesh
    loc = user_location()
    stream = get_active_stream()
    for t in dts:
        check_use(t, mesh, stream, what)
    for a in flat:
        if isinstance(a, torch.Tensor) and not isinstance(a, TensorCore) and a.dim() != 0:
            raise usage("LOCAL_TENSOR",
                        f"{what} mixes a local tensor (shape {tuple(a.shape)}) with the mesh "
                        f"{mesh._describe()}; create it inside mesh.activate()")
    sink = sink_for(mesh._session)
    # The frontend's own torch work (fake tensors, the simulated workers)
    # must not be captured as mesh operations.
    with local():
        if propagate == "cached":
            assert probe is not None
            if mesh._session.recording is not None:
                raise NotImplementedError(
                    f"{what} with propagate='cached' inside monarch.trace: learning the "
                    "result shapes runs the function, and nothing runs while tracing; give "
                    "propagate a function")
            single, metas = probe(args, mesh, stream, loc)
        else:
            single, metas = _fake_meta(what, propagate if propagate is not None else fn, args,
                                       dts)
        results = []
        for dtype, shape, device in metas:
            fake_device = device if device.type != "cuda" or HAS_CUDA else torch.device("cpu")
            with fake_mode:
                fake = torch.empty(shape, dtype=dtype, device=fake_device)
            results.append(new_dtensor(fake, mesh, stream,
                                       device if device != fake_device else None))
        emit(sink, list(args), results, mesh, stream, loc)
    if not single and not results:
        return None  # a function run for its effects
    return results[0] if single else tuple(results)


def remote(fn: Union[None, str, Callable[..., Any]] = None, *,
           propagate: Propagate = None) -> Any:
    """``remote(fn, propagate=...)``, ``remote("pkg.module.fn", propagate=...)``
    or ``@remote(propagate=...)``."""
    if fn is None:
        return lambda f: Remote(f, propagate)
    return Remote(fn, propagate)
