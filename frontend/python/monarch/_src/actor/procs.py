"""The Python worker processes that host a proc mesh's actors.

A proc mesh's actors live in a second set of worker processes -- Python ones
(``monarch/_src/bootstrap.py``) -- spawned through ``monarch._actors`` the first time an
actor is spawned on any view of the mesh, with the same shape and ranks;
except on meshes with Python tensor workers, where they live in the tensor
workers' processes (beside their rank's executor: ``rref``), and across hosts,
where the host agents start them. ``ProcMesh.stop()`` stops them.
"""

from __future__ import annotations

import atexit
import os
import pickle
import threading
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..common import python_workers
from ..common.future import Future, HandleSource
from ..common.pickling import dumps
from . import context, replies, supervision
from .extension import actors

#: (procs name, root shape, listen address of each root rank): what a proc
#: or actor mesh passed to another process carries to reach its procs.
ProcsRef = Tuple[str, List[Tuple[str, int]], List[str]]

# How long asking procs where they listen may take (first reference only).
_WHERE_TIMEOUT_MS = 30000

_states: "weakref.WeakKeyDictionary[Any, ActorProcs]" = weakref.WeakKeyDictionary()
_all_states: List["weakref.ref[ActorProcs]"] = []
_lock = threading.Lock()
_counter = [0]


class ActorProcs:
    """The Python worker processes of one root proc mesh (same shape), owned by
    the actor that spawned them (None: the controller)."""

    def __init__(self, shape: List[Tuple[str, int]], owner: Any = None,
                 tensor_procs: Any = None, hosts: Any = None,
                 attach: Optional[Tuple[str, List[str]]] = None):
        _counter[0] += 1
        self.shape = [(str(n), int(s)) for n, s in shape]
        self.name = f"procs{_counter[0]}"
        if context.in_actor():
            self.name = f"procs{_counter[0]}@{os.getpid()}"
        # Procs another process spawned, reached through a reference
        # (ProcsRef): this process holds a handle, not the processes.
        self.attached = attach is not None
        self._addrs: Optional[List[str]] = None
        self._reference: Any = None
        self._anchor: Any = None
        self._addrs_lock = threading.Lock()
        # A weakref to the Root of the ProcMesh these procs serve here
        # (proc_mesh.py; for attached procs the Root made for them is held
        # by attached_root).
        self.root: Any = None
        self.attached_root: Any = None
        # With Python tensor workers the actors live in the tensor workers'
        # processes (tensor_procs: their ProcMesh capsule); else in their own.
        self.beside_tensor_workers = tensor_procs is not None
        if attach is not None:
            self.name, addrs = attach
            self._addrs = list(addrs)
            self.procs = actors().attach_procs(self.name, self.shape, self._addrs, self.name)
        elif tensor_procs is not None:
            self.procs = actors().procs_from_capsule(tensor_procs, self.name)
        elif hosts is not None:
            # Across hosts the agents start the workers: no launcher script
            # (it would exist on this machine only), the command itself.
            exe, args, env = python_workers.worker_command("actor", hosts.python,
                                                           hosts.pythonpath)
            self.procs = actors().spawn_procs(
                [(n, int(s)) for n, s in shape], self.name, exe,
                worker_args=args, worker_env=env, hosts=hosts.capsule)
        else:
            self.procs = actors().spawn_procs(
                [(n, int(s)) for n, s in shape], self.name, python_workers.launcher_path())
        self.stopped = False
        self.owner = owner
        # Actor meshes on these procs whose actors failed an escalated event:
        # {mesh: {rank: reason}}.
        self.failed: Dict[str, Dict[int, str]] = {}
        # rref with propagate="cached": {(actor mesh, endpoint): CachedMeta}.
        self.cached_meta: Dict[Tuple[str, str], Any] = {}
        # The frontend's own actor meshes on these procs, spawned at first use
        # (actor_mesh.internal_mesh): {name: ActorMesh of every proc}.
        self.internal: Dict[str, Any] = {}
        self.internal_serial: Dict[str, int] = {}
        # Actor meshes stopped by ActorMesh.stop(): {mesh: reason}.
        self.stopped_meshes: Dict[str, str] = {}
        # The C++ handles of the actor meshes spawned from this process
        # (whole spawns).
        self.meshes: List[Any] = []
        # C++ handles by actor mesh name: spawned here, or attached from a
        # reference (actor_handle).
        self.handles: Dict[str, Any] = {}
        # The owner of each actor mesh spawned from here (the running actor
        # at spawn; None: the controller), by the runtime's mesh name.
        self.owners: Dict[str, Any] = {}
        supervision.register(self)

    # -- references (meshes passed to other processes) -------------------------------
    def addrs(self) -> List[str]:
        """Where each root rank listens: asked once of the procs themselves
        (the "where" of a small actor spawned on all of them)."""
        with self._addrs_lock:
            if self._addrs is None:
                self._addrs = self._ask_addrs()
            return list(self._addrs)

    def _ask_addrs(self) -> List[str]:
        return list(self._anchor_mesh().addrs(_WHERE_TIMEOUT_MS))

    def _anchor_mesh(self) -> Any:
        """A small actor on every proc (spawned at first use): it answers
        "where" and the frontend's internal calls (worker._INTERNAL)."""
        if self._anchor is None:
            # The actor workers' module (asyncio and all): imported when an
            # actor is spawned, not by programs that only trace.
            from .worker import Anchor

            header = {"mesh": "__monarch_where", "owner_port": None,
                      "names": [n for n, _ in self.shape], "sizes": [s for _, s in self.shape],
                      "ranks": list(range(self.size())), "sys_path": []}
            frames = [pickle.dumps(header, protocol=5)] + dumps((Anchor, (), {}))
            self._anchor = self.procs.spawn(f"__monarch_where@{os.getpid()}", frames)
        return self._anchor

    def ref(self) -> ProcsRef:
        if self.stopped:
            raise RuntimeError(f"a mesh on procs '{self.name}' cannot be passed on: they were "
                               "stopped")
        try:
            return (self.name, list(self.shape), self.addrs())
        except RuntimeError as e:
            raise RuntimeError(f"a mesh on procs '{self.name}' cannot be passed on: {e}") from None

    def actor_handle(self, cname: str, proc_ranks: List[int],
                     shape: List[Tuple[str, int]]) -> Any:
        """The C++ handle of actor mesh ``cname`` on these procs: the one this
        process spawned, else one attached to the actors."""
        with _lock:
            handle = self.handles.get(cname)
            if handle is None:
                handle = self._reference_procs().attach_actors(
                    cname, list(proc_ranks), [(n, int(s)) for n, s in shape])
                self.handles[cname] = handle
            return handle

    def _reference_procs(self) -> Any:
        """Procs to attach other processes' actor meshes to: these, when they
        came from a reference; else a second handle on the procs this
        process spawned (its events are nobody's: the key is unregistered)."""
        if self.attached:
            return self.procs
        if self._reference is None:
            self._reference = actors().attach_procs(self.name, self.shape, self.addrs(),
                                                    f"{self.name}#references")
        return self._reference

    def set_log_level(self, level: int) -> Any:
        """Sets the root logger's level in every actor worker (through the
        anchor actor on all of them); a Future."""
        with self._addrs_lock:
            anchor = self._anchor_mesh()
        future = anchor.call("__monarch_log_level__", dumps(((level,), {})), 0)
        return Future(HandleSource(future, lambda out: None))

    def size(self) -> int:
        n = 1
        for _, s in self.shape:
            n *= int(s)
        return n

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            # Calls waiting for deferred replies of their actors fail.
            replies.fail_procs(self.name, f"its procs '{self.name}' were stopped")
            if self._reference is not None:
                self._reference.stop()  # retired first: it would report the procs' end
            if not self.beside_tensor_workers:  # those stop with the tensor session
                self.procs.stop()


def procs_for(proc_mesh: Any) -> ActorProcs:
    """The actor procs of ``proc_mesh``'s root, spawned at first use."""
    key = proc_mesh._root_key()
    with _lock:
        state = _states.get(key)
        if state is None or state.stopped:
            tensor = proc_mesh._tensor_session()
            beside = tensor.actor_procs_capsule() if tensor is not None else None
            hosts = tensor.host_workers() if tensor is not None and beside is None else None
            state = ActorProcs(list(proc_mesh._root_shape()), context.current_instance(),
                               beside, hosts)
            state.root = weakref.ref(key)
            _states[key] = state
            _all_states.append(weakref.ref(state))
        return state


def from_ref(ref: ProcsRef) -> ActorProcs:
    """The procs a reference names, in this process: the ones it spawned (or
    attached before), else a new attached handle (owned, for the meshes
    spawned on it from here, by the running actor)."""
    name, shape, addrs = ref
    with _lock:
        state = supervision.registered(name)
        if state is None or state.stopped:
            state = ActorProcs(shape, context.current_instance(), attach=(name, list(addrs)))
            _all_states.append(weakref.ref(state))
        return state


def adopt(proc_mesh: Any, state: ActorProcs) -> None:
    """Makes ``state`` the actor procs of ``proc_mesh``'s root (a mesh rebuilt
    from a reference)."""
    with _lock:
        _states[proc_mesh._root_key()] = state


def existing_procs(proc_mesh: Any) -> Optional[ActorProcs]:
    """The actor procs of ``proc_mesh``'s root if they were started."""
    with _lock:
        return _states.get(proc_mesh._root_key())


def stop_actor_procs(proc_mesh: Any) -> None:
    """Stops the actor workers of a root proc mesh (ProcMesh.stop)."""
    with _lock:
        state = _states.pop(proc_mesh._root_key(), None)
    if state is not None:
        state.stop()


def stop_all() -> List[BaseException]:
    """Stops every actor procs handle of this process (at exit, and by
    shutdown_context); the errors of those that failed to stop. Procs that
    references were made of go last: the actors holding those references
    stop first, so none of them sees its peers vanish (and reports it) on
    the way out."""
    states = [state for state in (ref() for ref in _all_states) if state is not None]
    states.sort(key=lambda state: state._addrs is not None and not state.attached)
    errors: List[BaseException] = []
    for state in states:
        try:
            state.stop()
        except Exception as e:  # noqa: BLE001 - the others still stop
            errors.append(e)
    with _lock:
        _states.clear()
    return errors


atexit.register(stop_all)


def box(indices: Sequence[int], sizes: Sequence[int]) -> Optional[List[Tuple[int, int, int]]]:
    """Per-dim (start, stop, step) whose product is exactly `indices` in
    row-major order, or None when the set is not such a box."""
    coords = []
    for i in indices:
        c, rest = [], i
        for size in reversed(sizes):
            c.append(rest % size)
            rest //= size
        coords.append(tuple(reversed(c)))
    ranges = []
    for d in range(len(sizes)):
        values = sorted({c[d] for c in coords})
        step = values[1] - values[0] if len(values) > 1 else 1
        if any(b - a != step for a, b in zip(values, values[1:])):
            return None
        ranges.append((values[0], values[-1] + 1, step))
    expected: List[int] = []

    def walk(d: int, acc: int) -> None:
        if d == len(sizes):
            expected.append(acc)
            return
        start, stop, step = ranges[d]
        for v in range(start, stop, step):
            walk(d + 1, acc * sizes[d] + v)

    walk(0, 0)
    return ranges if expected == list(indices) else None


def sliced(handle: Any, shape: List[Tuple[str, int]], ranges: List[Tuple[int, int, int]]) -> Any:
    for (name, size), (start, stop, step) in zip(shape, ranges):
        if (start, stop, step) != (0, size, 1):
            handle = handle.slice(name, start, stop, step)
    return handle
