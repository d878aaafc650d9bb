"""The tensor engine as the actor layer reaches it (``actor/tensor_engine.py``):
the entry points proc meshes and actor meshes call, by module name, for
everything that needs torch."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Dict, List, Optional, Sequence, Tuple, Union

from torch.utils._pytree import tree_flatten, tree_unflatten

from ..backend.plan import plan
from . import api  # noqa: F401  (registers the tensor class results are made as)
from . import modes, tracing
from .core import TensorCore
from .dispatch import activate as _activate
from .movement import fetch_shard
from .movement import rank as _rank
from .remote import CachedMeta, call_distributed
from .remote_exec import META_PREFIX
from .session import Session


def start_session(shape: Sequence[Tuple[str, int]], *, backend: Optional[str],
                  memory_cap: int, timeout_ms: int, tensor_worker: str,
                  hosts: Optional[Dict[str, Any]]) -> Session:
    """The tensor session of a new root proc mesh: its workers start now,
    except while tracing (``monarch.trace``), where nothing runs."""
    recording = tracing.current()
    return Session(shape, backend=backend, memory_cap=memory_cap, timeout_ms=timeout_ms,
                   workers=recording is None, tensor_worker=tensor_worker, hosts=hosts,
                   recording=recording)


def activate(mesh: Any) -> ContextManager[Any]:
    return _activate(mesh)


def rank(mesh: Any, dims: Union[str, Sequence[str]]) -> Any:
    return _rank(mesh, dims)


def local_values() -> ContextManager[Any]:
    """Where the actor layer unpickles replies and port messages: inside
    ``mesh.activate()`` out of the capture (``modes.local``), so that their
    tensors are local ones; elsewhere nothing."""
    return modes.local() if modes.capture is not None else contextlib.nullcontext()


def rref(actor_mesh: Any, endpoint: str, prop: Any, args: Tuple[Any, ...],
         kwargs: Dict[str, Any]) -> Any:
    """The ``rref`` adverb: one ``call_actor`` instruction running ``endpoint``
    of the actors beside the tensor workers on their ranks' local shards; the
    results are distributed tensors shaped by ``@endpoint(propagate=...)``."""
    if tracing.current() is not None:
        raise NotImplementedError(
            f"rref of {actor_mesh._name}.{endpoint} inside monarch.trace: a traced program has "
            "no actors (the monarch dialect's endpoint calls need an actor mesh the trace does "
            "not create); call it eagerly")
    route = _route(actor_mesh, endpoint)  # the backend can run it at all
    propagate = prop._propagate
    if propagate is None or (isinstance(propagate, str) and propagate != "cached"):
        raise ValueError(f"rref of endpoint '{endpoint}' needs "
                         "@endpoint(propagate=fn or 'cached'): fn gives the result shapes "
                         "from fake inputs (the arguments without self)")
    state = actor_mesh._state
    name = actor_mesh._name
    key = (name, endpoint)
    cached = state.cached_meta.get(key)
    if cached is None:
        probe_endpoint = META_PREFIX + endpoint
        cached = state.cached_meta[key] = CachedMeta(
            lambda sink, a, results, pm, stream, loc: sink.call_actor(
                name, probe_endpoint, a, results, pm, stream, loc, route))
    return call_distributed(
        f"endpoint {name}.{endpoint}", prop._fn, propagate, args, kwargs,
        actor_mesh._proc_mesh,
        lambda sink, a, results, pm, stream, loc: sink.call_actor(
            name, endpoint, a, results, pm, stream, loc, route),
        skip_self=True, probe=cached.meta)


def _route(actor_mesh: Any, endpoint: str) -> Optional["plan.ActorRoute"]:
    """Where native tensor workers find the actors of ``actor_mesh`` (None:
    they share the Python tensor workers' processes). The actor procs have
    the tensor workers' root shape and ranks (actor/procs.py)."""
    state = actor_mesh._state
    if state.beside_tensor_workers:
        return None
    session = actor_mesh._proc_mesh._tensor_session() if actor_mesh._proc_mesh else None
    if session is None or session.backend_kind != "c":
        raise NotImplementedError(
            f"rref of {actor_mesh._name}.{endpoint}: the '{getattr(session, 'backend_kind', '?')}'"
            " backend has no worker processes to run it on; use backend 'c'")
    if state.attached:
        raise NotImplementedError(
            f"rref of {actor_mesh._name}.{endpoint}: these actors were passed to this process "
            "by reference; call rref from the process that spawned them")
    return plan.ActorRoute(procs=state.name, proc_addrs=state.addrs(),
                           mesh=actor_mesh._cname, proc_ranks=actor_mesh._root_ranks)


def local_shards(proc_mesh: Any, actor_ranks: Callable[[], Sequence[int]], what: str,
                 args: Tuple[Any, ...],
                 kwargs: Dict[str, Any]) -> Optional[List[Tuple[Tuple[Any, ...], Dict[str, Any]]]]:
    """An actor endpoint called with distributed tensors: for each actor
    (its proc's rank in ``actor_ranks()``, asked only when an argument is a
    distributed tensor), the arguments with every distributed
    tensor replaced by that rank's local shard -- fetched, in order with the
    tensor's stream, through the controller. None when no argument is a
    distributed tensor. A tensor must live on the actors' procs (each actor's
    rank in its mesh)."""
    flat, spec = tree_flatten((list(args), dict(kwargs)))
    where = [i for i, x in enumerate(flat) if isinstance(x, TensorCore)]
    if not where:
        return None
    session = proc_mesh._tensor_session() if proc_mesh is not None else None
    ranks = actor_ranks()
    shards: List[List[Any]] = []
    for i in where:
        t = flat[i]
        if session is None or t._mesh._session is not session:
            raise ValueError(f"{what}: a distributed tensor goes to actors on the processes it "
                             f"lives on; this one is on {t._mesh._describe()}, not on the procs "
                             "the actors were spawned on")
        view = t._mesh._view
        row = []
        for r in ranks:
            c = view.coords_of(r)
            if c is None:
                raise ValueError(f"{what}: the distributed tensor on {t._mesh._describe()} has "
                                 f"no shard on the process of actor rank {r}")
            row.append(fetch_shard(t, dict(zip(view.names, c))))
        shards.append(row)
    out = []
    for k in range(len(ranks)):
        mine = list(flat)
        for j, i in enumerate(where):
            mine[i] = shards[j][k].get()
        a, kw = tree_unflatten(mine, spec)
        out.append((tuple(a), kw))
    return out
