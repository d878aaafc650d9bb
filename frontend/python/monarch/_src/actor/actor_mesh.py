"""Actor meshes, endpoints and their adverbs (docs/python.md, "Actors").

Each actor is the C++ actor class "monarch.PythonActor" holding a Python
object (``worker.py``); every adverb is its endpoint "call" carrying
(endpoint name, frames). Values travel as frames (``common.pickling``:
cloudpickle, large tensors as raw payload frames). Adverbs are the C++ ones
(``ActorMesh::call<std::vector<Blob>>`` ...), so ordering, casting trees,
supervision and death detection are the runtime's.
"""

from __future__ import annotations

import itertools
import os
import pickle
import sys
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..common.errors import SupervisionError
from ..common.future import Future, HandleSource, gather
from ..common.pickling import dumps
from ..mesh.view import MeshView
from . import context, controller_port, replies
from .ports import Port
from .replies import _exited, _raise_status, _unpack_reply
from . import procs as procs_mod
from .actor import (Actor, EndpointProperty, NotAnEndpoint, endpoint_names,
                    endpoint_property, endpoint_takes_port)
from .stream import in_arrival_order
from .tensor_engine import ENGINE_MODULE, engine
from .shape import Extent
from .value_mesh import ValueMesh

FLAG_NO_REPLY = 1  # kept in step with worker.py
FLAG_TO_PORT = 2  # the frames carry a Port for the result (send)
FLAG_SLICED = 4  # the frames end with the slice the message went to (message_rank)
FLAG_PORT_ARG = 8  # the method takes a Port first (as_endpoint(..., explicit_response_port=True))
FLAG_REPLY_PORT = replies.FLAG_REPLY_PORT  # the last frame is the call's reply channel


def spawn(proc_mesh: Any, name: str, actor_class: type, *args: Any, **kwargs: Any) -> "ActorMesh":
    """``proc_mesh.spawn(name, ActorClass, *args, **kwargs)``: one actor per proc
    of the view, constructed on its worker before this returns."""
    if not isinstance(name, str):
        raise TypeError(f"spawn takes the actor mesh's name as a str, got {type(name).__name__}")
    if not name:
        raise ValueError("spawn needs a non-empty name for the actor mesh")
    if any(c in "[]/" or c.isspace() or not c.isprintable() for c in name):
        raise ValueError(f"actor mesh name {name!r} may not hold '[', ']', '/', whitespace or "
                         "control characters (the runtime names actors '<mesh>[<rank>]')")
    if not isinstance(actor_class, type) or not issubclass(actor_class, Actor):
        raise TypeError(f"spawn takes an Actor subclass, got {actor_class!r}")
    state = procs_mod.procs_for(proc_mesh)
    view: MeshView = proc_mesh._view
    ranks = view.ranks()
    ranges = procs_mod.box(ranks, [s for _, s in state.shape])
    if ranges is None:
        raise NotImplementedError(
            f"spawning actors on a view whose ranks {ranks} are not a box of the root mesh")
    handle_procs = procs_mod.sliced(state.procs, state.shape, ranges)
    # Classes of the controller's __main__ travel by value (common.pickling).
    payload = dumps((actor_class, args, kwargs))
    addr, port = state.procs.supervision_port()
    # On procs reached through a reference, others spawn too: the runtime's
    # name of the mesh is made unique (Monarch's names are unique as well).
    cname = f"{name}@{os.getpid()}.{next(_spawn_serial)}" if state.attached else name
    header = {
        "mesh": cname,
        "owner_port": (addr, port),
        "names": list(view.names),
        "sizes": list(view.sizes),
        "ranks": ranks,
        "sys_path": [p for p in sys.path if p],
        "log_level": proc_mesh._root.logging.get("level"),
        # Where get_or_spawn_controller in these actors asks (controllers.py).
        "controllers": controller_port.for_header(),
    }
    frames = [pickle.dumps(header, protocol=5)] + payload
    handle = handle_procs.spawn(cname, frames)
    state.meshes.append(handle)
    state.handles[cname] = handle
    owner = context.current_instance()
    state.owners[cname] = owner
    if state.attached and state.owner is None:
        state.owner = owner  # proc failures under what it spawned reach it
    mesh = ActorMesh(state, name, actor_class, handle, ranks, view)
    mesh._proc_mesh = proc_mesh
    return mesh


_spawn_serial = itertools.count(1)
_internal_lock = threading.Lock()


def internal_mesh(proc_mesh: Any, name: str, actor_class: type) -> "ActorMesh":
    """The frontend's own actor mesh ``name`` of ``actor_class`` (made
    without arguments) on every proc of ``proc_mesh``'s root: spawned at the
    first call for that root and kept with its actor procs -- spawned anew
    (``name.2``, ...) once an actor of it failed, so that one failure (its
    supervision event) does not fail every later call; returned as the actors
    of ``proc_mesh``'s procs (``ActorMesh._viewed_as``). The remote functions'
    adverbs run on it (the tensor layer's ``remote_actor``)."""
    if getattr(proc_mesh._root_key(), "stopped", False):
        raise RuntimeError(f"{name}: `ProcMesh` has already been stopped")
    with _internal_lock:
        state = procs_mod.procs_for(proc_mesh)
        whole = state.internal.get(name)
        if whole is None or state.failed.get(whole._cname) or any(
                event[0] == whole._cname for event in state.procs.events()):
            serial = state.internal_serial[name] = state.internal_serial.get(name, 0) + 1
            whole = spawn(proc_mesh._whole(), name if serial == 1 else f"{name}.{serial}",
                          actor_class)
            state.internal[name] = whole
    return whole._viewed_as(proc_mesh)


class ActorMesh:
    """The actors of one ``spawn``, or a slice of them. ``mesh.endpoint`` is an
    :class:`Endpoint` with the adverbs.

    A mesh pickles to a reference (``__reduce__``): passed to an actor's
    endpoint or constructor, or returned from one, it messages the same
    actors from the receiving process."""

    def __init__(self, state: procs_mod.ActorProcs, name: str, actor_class: type, root: Any,
                 root_ranks: List[int], view: MeshView):
        self._state = state
        self._name = name
        self._class = actor_class
        self._root = root  # C++ Actors of the whole spawn
        self._cname = root.name  # the runtime's name of the mesh (events, failures)
        self._root_shape = [tuple(x) for x in root.shape()]
        self._root_ranks = list(root_ranks)
        self._position = {r: i for i, r in enumerate(root_ranks)}
        self._view = view
        self._targets: Optional[List[Tuple[Any, List[int]]]] = None
        self._endpoints = set(endpoint_names(actor_class))
        self._proc_mesh: Any = None  # the ProcMesh (view) the actors are on
        self._message_slice = _message_slice(view, self._root_ranks)

    # -- shape -------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def sizes(self) -> Dict[str, int]:
        return dict(zip(self._view.names, self._view.sizes))

    @property
    def extent(self) -> Extent:
        """The mesh's shape as Monarch's ``Extent`` (a mapping of sizes)."""
        return Extent(list(self._view.names), list(self._view.sizes))

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(self._view.names)

    def size(self, dims: Any = None) -> int:
        return self._view.size(dims)

    def __len__(self) -> int:
        return self._view.size()

    def slice(self, **coords: Any) -> "ActorMesh":
        view = self._view.slice(**coords)
        mesh = ActorMesh.__new__(ActorMesh)
        mesh.__dict__.update(self.__dict__)
        mesh._view = view
        mesh._targets = None
        mesh._message_slice = _message_slice(view, self._root_ranks)
        if self._proc_mesh is not None:
            mesh._proc_mesh = self._proc_mesh.slice(**coords)
        return mesh

    def _viewed_as(self, proc_mesh: Any) -> "ActorMesh":
        """This mesh, spawned on every proc of its root, as the actors of the
        procs of ``proc_mesh`` -- a view of any kind (slice, split, rename,
        flatten) of the same root: messages go to the view's ranks, value
        meshes have its shape, and each actor's ``current_rank()`` is its
        point in the view. One per view, kept."""
        view: MeshView = proc_mesh._view
        views = self.__dict__.setdefault("_views", {})
        mesh = views.get(view)
        if mesh is None:
            missing = [r for r in view.ranks() if r not in self._position]
            if missing:
                raise ValueError(f"actor mesh '{self._name}' has no actors on ranks {missing}")
            mesh = ActorMesh.__new__(ActorMesh)
            mesh.__dict__.update(self.__dict__)
            mesh._view = view
            mesh._targets = None
            mesh._message_slice = None if view == self._view else (
                view.offset, tuple((d.name, d.size, d.stride) for d in view.dims))
            mesh._proc_mesh = proc_mesh  # any mesh of this view: same root, same procs
            if len(views) > 64:
                views.clear()
            views[view] = mesh
        return mesh

    def __getattr__(self, name: str) -> Any:
        endpoints = self.__dict__.get("_endpoints", set())
        if name in endpoints:
            return Endpoint(self, name)
        cls = self.__dict__.get("_class")
        if cls is not None and not name.startswith("__") and callable(getattr(cls, name, None)):
            return NotAnEndpoint(self, name)  # for as_endpoint(mesh.method)
        raise AttributeError(
            f"actor mesh '{self.__dict__.get('_name')}' of {getattr(cls, '__qualname__', '?')} "
            f"has no endpoint '{name}'")

    def __repr__(self) -> str:
        return f"<ActorMesh '{self._name}' {self._class.__qualname__} {self._view.shape_string()}>"

    def __reduce__(self) -> Any:
        return (_rebuild_actor_mesh, (self._state.ref(), self._cname, self._name, self._class,
                                      self._root_ranks, self._root_shape, self._view))

    # -- messaging ---------------------------------------------------------------
    def _plan(self) -> List[Tuple[Any, List[int]]]:
        """C++ handles covering this view: one box, else one per rank."""
        if self._targets is None:
            positions = [self._position[r] for r in self._view.ranks()]
            sizes = [s for _, s in self._root_shape]
            ranges = procs_mod.box(positions, sizes)
            if ranges is not None:
                self._targets = [(procs_mod.sliced(self._root, self._root_shape, ranges),
                                  positions)]
            else:
                targets = []
                for p in positions:
                    single = procs_mod.box([p], sizes)
                    assert single is not None
                    targets.append((procs_mod.sliced(self._root, self._root_shape, single), [p]))
                self._targets = targets
        return self._targets

    # -- lifecycle -----------------------------------------------------------------
    @property
    def initialized(self) -> Future[None]:
        """Monarch's ``await mesh.initialized``: completed, since ``spawn``
        returns once every constructor has run (a constructor that raised is
        a supervision event, not an error here)."""
        return Future.ready(None)

    def stop(self) -> Future[None]:
        """Stops every actor of the spawned mesh (slices included; other actor
        meshes on the same procs live on): later calls raise SupervisionError.
        A Future that completes once the actors have stopped."""
        state = self._state
        if state.stopped or self._cname in state.stopped_meshes:
            return Future.ready(None)
        state.stopped_meshes[self._cname] = "stopped by ActorMesh.stop()"
        replies.fail_mesh(self._cname, "stopped by ActorMesh.stop()")
        try:
            handle = self._root.call("__monarch_stop__", dumps(((), {})), 0)
        except Exception as e:  # noqa: BLE001 - delivered by get()
            return Future.failed(e)
        return Future(HandleSource(handle, lambda out: None))

    def _check_alive(self) -> None:
        if self._state.stopped:
            raise SupervisionError(f"actor mesh '{self._name}': its procs were stopped",
                                   self._name, -1)
        stopped = self._state.stopped_meshes.get(self._cname)
        if stopped is not None:
            raise SupervisionError(_exited(self._cname, -1, stopped), self._cname, -1)
        failed = self._state.failed.get(self._cname)
        if failed:
            for r in self._view.ranks():
                position = self._position[r]
                if position in failed:
                    raise SupervisionError(_exited(self._cname, position, failed[position]),
                                           self._cname, position)


def _message_slice(view: MeshView, root_ranks: List[int]) -> Optional[Tuple[Any, ...]]:
    """What a message to ``view`` carries when it is a slice of the spawned
    mesh (``root_ranks``), so that each actor's ``message_rank`` is its point
    in it (worker.py): ``(offset, ((name, size, stride), ...))``; None for
    the whole mesh."""
    if view.ranks() == root_ranks:
        return None
    return (view.offset, tuple((d.name, d.size, d.stride) for d in view.dims))


def _rebuild_actor_mesh(ref: procs_mod.ProcsRef, cname: str, name: str, actor_class: type,
                        root_ranks: List[int], root_shape: List[Tuple[str, int]],
                        view: MeshView) -> ActorMesh:
    """An ActorMesh from its reference, in the process that unpickles it."""
    state = procs_mod.from_ref(ref)
    handle = state.actor_handle(cname, root_ranks, root_shape)
    return ActorMesh(state, name, actor_class, handle, root_ranks, view)


class Endpoint:
    """``mesh.train``: call / call_one / choose / broadcast / stream / rref."""

    def __init__(self, mesh: ActorMesh, name: str):
        self._mesh = mesh
        self._name = name

    def _frames(self, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                port: Any = None) -> Tuple[List[Any], int]:
        """The message's frames and the flags they need: ``(args, kwargs)``,
        then the port of ``send``, then -- for a message to a slice of
        the spawned mesh -- the slice, so that each actor's ``message_rank``
        is its point in that slice (worker.py)."""
        mesh = self._mesh
        mesh._check_alive()
        payload: Tuple[Any, ...] = (args, kwargs)
        flags = 0
        if port is not None:
            payload, flags = payload + (port,), FLAG_TO_PORT
        if mesh._message_slice is not None:
            payload += (mesh._message_slice,)
            flags |= FLAG_SLICED
        return dumps(payload), flags

    def _per_actor(self, args: Tuple[Any, ...], kwargs: Dict[str, Any], port: Any = None,
                   one: bool = False) -> Optional[List[Tuple[Any, List[Any], int]]]:
        """With distributed tensors among the arguments, one message per actor
        carrying its local shards, as Monarch delivers them: [(single-actor
        handle, frames, flags)] in the mesh's rank order (``one``: for the
        actor ``choose`` picks, the only one whose shards are fetched); None
        without. Each message carries the whole mesh as its slice, so
        ``message_rank`` is the actor's point in the mesh the call went to."""
        if ENGINE_MODULE not in sys.modules:  # no tensor engine: no distributed tensors
            return None
        mesh = self._mesh
        picked: List[int] = []

        def ranks() -> List[int]:  # asked only when there are shards to fetch
            every = mesh._view.ranks()
            picked[:] = [every[_next_choice(len(every))]] if one else every
            return picked

        shards = engine().local_shards(mesh._proc_mesh, ranks, self._describe(), args, kwargs)
        if shards is None:
            return None
        mesh._check_alive()
        view = mesh._view
        whole = (view.offset, tuple((d.name, d.size, d.stride) for d in view.dims))
        sizes = [s for _, s in mesh._root_shape]
        out = []
        for r, (a, kw) in zip(picked, shards):
            single = procs_mod.box([mesh._position[r]], sizes)
            assert single is not None
            handle = procs_mod.sliced(mesh._root, mesh._root_shape, single)
            payload: Tuple[Any, ...] = (a, kw)
            flags = FLAG_SLICED
            if port is not None:
                payload, flags = payload + (port,), flags | FLAG_TO_PORT
            out.append((handle, dumps(payload + (whole,)), flags))
        return out

    def _describe(self) -> str:
        """What errors about the call name."""
        return f"endpoint {self._mesh._name}.{self._name}"

    def _takes_port(self) -> bool:
        """Whether the endpoint answers through a Port it takes after self
        (``explicit_response_port``): then the adverbs wait for what it
        sends, whenever it sends it (replies.py)."""
        return endpoint_takes_port(self._mesh._class, self._name)

    def call(self, *args: Any, **kwargs: Any) -> Future[ValueMesh]:
        """Every actor of the mesh; a Future of a :class:`ValueMesh`."""
        mesh = self._mesh
        names, sizes = list(mesh._view.names), list(mesh._view.sizes)
        if self._takes_port():
            return self._deferred(args, kwargs, "mesh").mesh_future(
                lambda vals: ValueMesh(names, sizes, vals))
        per_actor = self._per_actor(args, kwargs)
        if per_actor is not None:
            return gather([self._one(h.call_one(self._name, f, fl)) for h, f, fl in per_actor],
                          lambda vals: ValueMesh(names, sizes, list(vals)))
        frames, flags = self._frames(args, kwargs)
        ep = self._name

        def convert(out: Any) -> List[Any]:
            if out[0] == "err":
                _raise_status(out[1], out[2], ep)
            return [_unpack_reply(v, ep) for v in out[1]]

        plan = mesh._plan()
        if len(plan) == 1:
            return Future(HandleSource(
                plan[0][0].call(ep, frames, flags),
                lambda out: ValueMesh(names, sizes, convert(out))))
        parts = [Future(HandleSource(h.call(ep, frames, flags), convert)) for h, _ in plan]
        return gather(parts, lambda vals: ValueMesh(names, sizes, [x for v in vals for x in v]))

    def call_one(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """The only actor of the mesh (an error if it has more than one)."""
        mesh = self._mesh
        if len(mesh) != 1:
            raise ValueError(
                f"call_one on actor mesh '{mesh._name}' of {len(mesh)} actors; it needs exactly one")
        if self._takes_port():
            return self._deferred(args, kwargs, "one").one_future()
        per_actor = self._per_actor(args, kwargs)
        if per_actor is not None:
            (handle, frames, flags), = per_actor
            return self._one(handle.call_one(self._name, frames, flags))
        (handle, _), = mesh._plan()
        frames, flags = self._frames(args, kwargs)
        return self._one(handle.call_one(self._name, frames, flags))

    def choose(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """One live actor of the mesh, round robin."""
        if self._takes_port():
            return self._deferred(args, kwargs, "choose").one_future()
        per_actor = self._per_actor(args, kwargs, one=True)
        if per_actor is not None:  # each actor gets its own shards: any one of them
            (handle, frames, flags), = per_actor
            return self._one(handle.call_one(self._name, frames, flags))
        frames, flags = self._frames(args, kwargs)
        return self._one(self._chosen().choose(self._name, frames, flags))

    def broadcast(self, *args: Any, **kwargs: Any) -> None:
        """Every actor, no reply; an exception stops that actor and is a
        supervision event of the mesh."""
        per_actor = self._per_actor(args, kwargs)
        if per_actor is not None:
            for handle, frames, flags in per_actor:
                self._broadcast_on(handle, frames, flags | FLAG_NO_REPLY)
            return
        frames, flags = self._frames(args, kwargs)
        self._broadcast(frames, flags | FLAG_NO_REPLY)

    def _send(self, args: Tuple[Any, ...], kwargs: Dict[str, Any], port: Any,
              selection: str) -> None:
        """``send``: every actor (``"all"``) or one (``"choose"``) runs
        the endpoint; results go to ``port`` (or nowhere)."""
        per_actor = self._per_actor(args, kwargs, port, one=selection == "choose")
        if per_actor is not None:
            for handle, frames, flags in per_actor:
                self._broadcast_on(handle, frames, flags | FLAG_NO_REPLY)
            return
        frames, flags = self._frames(args, kwargs, port)
        flags |= FLAG_NO_REPLY
        if selection == "choose":
            # choose() has a reply; with the flags it is empty and dropped.
            self._chosen().choose(self._name, frames, flags)
        else:
            self._broadcast(frames, flags)

    def _chosen(self) -> Any:
        """The C++ handle that ``choose`` goes through: the one of a box,
        else the next single-rank one, round robin."""
        plan = self._mesh._plan()
        if len(plan) == 1:
            return plan[0][0]
        return plan[_next_choice(len(plan))][0]

    def _broadcast(self, frames: List[Any], flags: int) -> None:
        for handle, _ in self._mesh._plan():
            self._broadcast_on(handle, frames, flags)

    def _broadcast_on(self, handle: Any, frames: List[Any], flags: int) -> None:
        try:
            handle.broadcast(self._name, frames, flags)
        except RuntimeError as e:
            raise SupervisionError(str(e), self._mesh._name, -1) from None

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[Future[Any]]:
        """Every actor; yields one Future per actor, as Monarch does: the k-th
        completes with the k-th reply to arrive (``[f.get() for f in ...]``,
        or ``await f``)."""
        if self._takes_port():
            return iter(self._deferred(args, kwargs, "stream").stream_futures())
        per_actor = self._per_actor(args, kwargs)
        if per_actor is not None:
            replies = [self._one(h.call_one(self._name, f, fl)) for h, f, fl in per_actor]
            return iter(in_arrival_order(replies))
        frames, flags = self._frames(args, kwargs)
        replies = [self._one(f) for h, _ in self._mesh._plan()
                   for f in h.stream(self._name, frames, flags)]
        return iter(in_arrival_order(replies))

    def _deferred(self, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                  mode: str) -> "replies.Pending":
        """Sends an adverb's call of an endpoint that answers through a Port
        (``mode`` as :class:`replies.Pending` takes it), through the same C++
        adverb as any other call, with a reply channel opened for it: the
        actors hand the endpoint a Port of that channel, and the adverb's
        futures are what each rank sends on it."""
        mesh = self._mesh
        ep = self._name
        per_actor = self._per_actor(args, kwargs, one=mode == "choose")
        frames: List[Any] = []
        flags = 0
        if per_actor is None:
            frames, flags = self._frames(args, kwargs)
        flags |= FLAG_REPLY_PORT | FLAG_PORT_ARG  # the port goes first, however declared
        if per_actor is not None and mode == "choose":
            mode = "one"  # the actor whose shards were fetched
        if per_actor is not None:
            positions = [p for handle, _, _ in per_actor for p in handle.ranks()]
        elif mode == "one":
            (handle, _), = mesh._plan()
            positions = list(handle.ranks())
        else:
            positions = [mesh._position[r] for r in mesh._view.ranks()]
        pending = replies.Pending(mesh, ep, positions, mode)
        try:
            if per_actor is not None:
                for handle, f, fl in per_actor:
                    pending.watch(handle.call_one(ep, pending.framed(f), fl | flags),
                                  list(handle.ranks()), True)
            elif mode == "one":
                (handle, _), = mesh._plan()
                pending.watch(handle.call_one(ep, pending.framed(frames), flags),
                              positions, True)
            elif mode == "choose":
                pending.watch(self._chosen().choose(ep, pending.framed(frames), flags), [],
                              True)
            elif mode == "stream":
                for handle, _ in mesh._plan():
                    for rank, f in zip(handle.ranks(),
                                       handle.stream(ep, pending.framed(frames), flags)):
                        pending.watch(f, [rank], True)
            else:
                for handle, _ in mesh._plan():
                    pending.watch(handle.call(ep, pending.framed(frames), flags),
                                  list(handle.ranks()), False)
        except BaseException:
            pending.close()
            raise
        return pending

    def rref(self, *args: Any, **kwargs: Any) -> Any:
        """Every actor, on distributed tensors: each actor's endpoint gets its
        rank's local shards (in the process of that rank's tensor worker, or
        copies sent to the actor's own process from a native one), and the
        tensors it returns form the result (distributed tensors, shapes from
        ``@endpoint(propagate=...)``; see the tensor engine's ``rref``)."""
        mesh = self._mesh
        mesh._check_alive()
        return engine().rref(mesh, self._name, self._property(), args, kwargs)

    def _property(self) -> EndpointProperty:
        """How ``rref`` shapes the endpoint's results (``@endpoint(propagate=...)``)."""
        return endpoint_property(self._mesh._class, self._name)

    def _one(self, handle: Any) -> Future[Any]:
        ep = self._name

        def convert(out: Any) -> Any:
            if out[0] == "err":
                _raise_status(out[1], out[2], ep)
            return _unpack_reply(out[1], ep)

        return Future(HandleSource(handle, convert))

    def __repr__(self) -> str:
        return f"<Endpoint {self._mesh._name}.{self._name}>"


def send(endpoint: Any, args: Tuple[Any, ...] = (), kwargs: Optional[Dict[str, Any]] = None,
         port: Optional[Port[Any]] = None, selection: str = "all") -> None:
    """Calls ``endpoint`` (``mesh.method``) without waiting: on every actor
    (``selection="all"``) or one (``"choose"``). With a ``port``, each
    result, or exception, is sent to it; without, results are dropped and an
    exception stops the actor (as ``broadcast``). ``endpoint`` may also be
    what stands for one: a ``monarch.remote`` function, which runs on the
    ranks of the active mesh (its ``_monarch_endpoint()`` is the endpoint)."""
    stand_in = not isinstance(endpoint, Endpoint) and \
        callable(getattr(type(endpoint), "_monarch_endpoint", None))
    if not isinstance(endpoint, Endpoint) and not stand_in:
        raise TypeError(f"send takes an endpoint of an actor mesh (mesh.method) or a "
                        f"monarch.remote function, got {endpoint!r}")
    if not isinstance(args, tuple):
        raise TypeError(f"send's args is a tuple, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"send's kwargs is a dict, got {type(kwargs).__name__}")
    if port is not None and not isinstance(port, Port):
        raise TypeError(f"send's port is a Port (Channel.open()), got {port!r}")
    if selection not in ("all", "choose"):
        raise ValueError(f"send's selection is 'all' or 'choose', got {selection!r}")
    if stand_in:
        endpoint = endpoint._monarch_endpoint()
    endpoint._send(args, kwargs or {}, port, selection)


_counter_choose = [0]


def _next_choice(n: int) -> int:
    """The next of ``n`` targets of ``choose``, round robin across calls."""
    _counter_choose[0] = (_counter_choose[0] + 1) % n
    return _counter_choose[0]


def actor_pids(mesh: ActorMesh) -> Dict[int, int]:
    """{rank of the view: OS pid of its worker} (tests, diagnostics)."""
    pids = mesh._state.procs.pids()
    return {i: pids[r] for i, r in enumerate(mesh._view.ranks())}


def supervision_events(mesh: ActorMesh) -> List[Tuple[str, int, str]]:
    """Supervision events of the actor procs of this mesh's proc mesh so far:
    [(mesh, rank, reason)]."""
    return mesh._state.procs.events()
