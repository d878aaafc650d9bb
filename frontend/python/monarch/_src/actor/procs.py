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
import threading
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..common import python_workers
from . import context, supervision
from .extension import actors

_states: "weakref.WeakKeyDictionary[Any, ActorProcs]" = weakref.WeakKeyDictionary()
_all_states: List["weakref.ref[ActorProcs]"] = []
_lock = threading.Lock()
_counter = [0]


class ActorProcs:
    """The Python worker processes of one root proc mesh (same shape), owned by
    the actor that spawned them (None: the controller)."""

    def __init__(self, shape: List[Tuple[str, int]], owner: Any = None,
                 tensor_procs: Any = None, hosts: Any = None):
        _counter[0] += 1
        self.shape = list(shape)
        self.name = f"procs{_counter[0]}"
        if context.in_actor():
            self.name = f"procs{_counter[0]}@{os.getpid()}"
        # With Python tensor workers the actors live in the tensor workers'
        # processes (tensor_procs: their ProcMesh capsule); else in their own.
        self.beside_tensor_workers = tensor_procs is not None
        if tensor_procs is not None:
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
        supervision.register(self)

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
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
            _states[key] = state
            _all_states.append(weakref.ref(state))
        return state


def stop_actor_procs(proc_mesh: Any) -> None:
    """Stops the actor workers of a root proc mesh (ProcMesh.stop)."""
    with _lock:
        state = _states.pop(proc_mesh._root_key(), None)
    if state is not None:
        state.stop()


@atexit.register
def _stop_all() -> None:
    for ref in _all_states:
        state = ref()
        if state is not None:
            try:
                state.stop()
            except Exception:
                pass


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
