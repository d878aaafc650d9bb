"""Proc meshes: the root made by ``spawn_procs`` and its views (DESIGN.md §6.1).

A root proc mesh has one tensor worker per rank (started by the tensor
engine: ``tensor_engine.py``) and, from the first ``spawn``, one actor worker
per rank (``procs.py``). Views -- ``rename``, ``split``, ``slice``,
``flatten`` -- are affine views of the root's ranks and share its processes.
"""

from __future__ import annotations

import contextlib
import logging
import numbers
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..common.future import Future
from ..mesh.view import MeshView
from . import actor_mesh, procs
from .shape import Extent
from .tensor_engine import engine


class Root:
    """What the views of one ``spawn_procs`` share: the shape and the tensor
    session (the tensor engine's; None while tracing without workers)."""

    __slots__ = ("shape", "session", "stopped", "logging", "__weakref__")

    def __init__(self, shape: List[Tuple[str, int]], session: Any):
        self.shape = shape
        self.session = session
        self.stopped = False
        # What logging_option last asked for (docs/python.md, "Lifecycle");
        # empty until it is called (the workers keep Python's defaults).
        self.logging: Dict[str, Any] = {}


class ProcMesh:
    """A mesh of processes (one tensor worker each), or a view of one."""

    def __init__(self, root: Root, view: MeshView, parent: Optional["ProcMesh"] = None,
                 derivation: Optional[Tuple[str, Any]] = None):
        self._root = root
        self._session = root.session
        self._view = view
        self._parent = parent
        self._derivation = derivation

    # -- what the actor procs and the tensor engine ask of a mesh --------------------
    def _root_key(self) -> Root:
        return self._root

    def _root_shape(self) -> List[Tuple[str, int]]:
        return self._root.shape

    def _tensor_session(self) -> Any:
        return self._root.session

    def _whole(self) -> "ProcMesh":
        """The mesh of every proc of the root (as ``spawn_procs`` made it)."""
        return ProcMesh(self._root, MeshView.root(self._root.shape))

    # -- views -------------------------------------------------------------------
    def _derive(self, kind: str, args: Any) -> "ProcMesh":
        if kind == "slice":
            view = self._view.slice(**args)
        elif kind == "split":
            dims, sizes = args
            view = self._view.split(dims, sizes)
        elif kind == "rename":
            view = self._view.rename(args)
        elif kind == "flatten":
            view = self._view.flatten(args)
        else:  # pragma: no cover
            raise AssertionError(kind)
        return ProcMesh(self._root, view, self, (kind, args))

    def rename(self, **renames: str) -> "ProcMesh":
        """``rename(host="dp")``: the same ranks under new dim names."""
        return self._derive("rename", dict(renames))

    def split(self, **kwargs: Union[Sequence[str], int]) -> "ProcMesh":
        """``split(host=("dp", "pp"), gpu=("tp",), pp=2)`` (DESIGN.md §6.1)."""
        dims: Dict[str, Tuple[str, ...]] = {}
        sizes: Dict[str, int] = {}
        for k, v in kwargs.items():
            if isinstance(v, (tuple, list)):
                dims[k] = tuple(v)
            elif isinstance(v, str):
                dims[k] = (v,)
            elif isinstance(v, int) and not isinstance(v, bool):
                sizes[k] = v
            else:
                raise TypeError(
                    f"split takes dim=(names...) or name=size, got {k}={type(v).__name__}"
                )
        return self._derive("split", (dims, sizes))

    def slice(self, **coords: Union[int, slice, range]) -> "ProcMesh":
        """``slice(host=1)`` drops the dim; ``slice(gpu=slice(0, 2))`` keeps it."""
        for k, v in coords.items():
            if not isinstance(v, (int, slice, range)) or isinstance(v, bool):
                raise TypeError(
                    f"slice of dimension '{k}' takes an int or a slice, got {type(v).__name__}"
                )
        return self._derive("slice", dict(coords))

    def flatten(self, name: str) -> "ProcMesh":
        return self._derive("flatten", name)

    # -- shape -------------------------------------------------------------------
    def size(self, dims: Union[None, str, Sequence[str]] = None) -> int:
        return self._view.size(dims)

    @property
    def sizes(self) -> Dict[str, int]:
        return dict(zip(self._view.names, self._view.sizes))

    @property
    def extent(self) -> Extent:
        """The mesh's shape as Monarch's ``Extent`` (a mapping of sizes)."""
        return Extent(list(self._view.names), list(self._view.sizes))

    @property
    def _labels(self) -> List[str]:
        # Monarch's own examples read this private name (spmd_ddp.py).
        return list(self._view.names)

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(self._view.names)

    def __len__(self) -> int:
        return self._view.size()

    def to_table(self) -> str:
        return self._view.to_table()

    def ranks(self) -> List[int]:
        """The global ranks of this view, row-major."""
        return self._view.ranks()

    # -- tensors (the tensor engine) ----------------------------------------------
    @contextlib.contextmanager
    def activate(self) -> Iterator["ProcMesh"]:
        """Torch calls inside run on every rank of this mesh."""
        with engine().activate(self):
            yield self

    def rank(self, dims: Union[str, Sequence[str]]) -> Any:
        """A 0-d int64 distributed tensor: each proc's coordinate along dims."""
        return engine().rank(self, dims)

    # -- actors ------------------------------------------------------------------
    def spawn(self, name: str, actor_class: Any, *args: Any, **kwargs: Any) -> Any:
        """``procs.spawn("trainers", Trainer, *args)``: one actor per rank of this
        view, on the mesh's actor worker processes (docs/python.md "Actors")."""
        if self._root.stopped:
            raise RuntimeError(f"spawning '{name}': `ProcMesh` has already been stopped")
        return actor_mesh.spawn(self, name, actor_class, *args, **kwargs)

    def stop(self) -> "Future[None]":
        """Stops the mesh's worker processes -- tensor workers and the actor
        workers started by ``spawn`` -- and returns a completed Future
        (``await procs.stop()`` / ``procs.stop().get()``, as Monarch's).
        Stopping twice does nothing; so does stopping a view (slice, split,
        ...): only the mesh ``spawn_procs`` returned stops its processes."""
        root = self._root
        if root.stopped or self._parent is not None:
            return Future.ready(None)
        root.stopped = True
        try:
            # Actor workers first: across hosts, stopping the session detaches
            # the agents, which would kill them rather than let them stop.
            try:
                procs.stop_actor_procs(self)
            finally:
                if root.session is not None:
                    root.session.stop()
        except Exception as e:  # noqa: BLE001 - delivered by get()
            return Future.failed(e)
        return Future.ready(None)

    def logging_option(self, stream_to_client: bool = True,
                       aggregate_window_sec: Optional[int] = 3,
                       level: int = logging.INFO) -> "Future[None]":
        """Monarch's log options, accepted and kept; a completed Future.

        What this frontend does with them: the workers' stdout and stderr
        always reach the controller's (each line as the process wrote it),
        ``stream_to_client=False`` included; lines are not aggregated
        (``aggregate_window_sec`` is kept, never applied); ``level`` sets
        the level of the root logger of the actor workers already started
        (those started later keep Python's default)."""
        if aggregate_window_sec is not None and (
                isinstance(aggregate_window_sec, bool)
                or not isinstance(aggregate_window_sec, numbers.Real)):
            raise TypeError(f"aggregate_window_sec takes a number of seconds or None, got "
                            f"{type(aggregate_window_sec).__name__}")
        if aggregate_window_sec is not None and aggregate_window_sec < 0:
            raise ValueError(
                f"aggregate_window_sec must be >= 0 or None, got {aggregate_window_sec}")
        if not isinstance(level, int):
            raise TypeError(f"level takes a logging level (an int), got {type(level).__name__}")
        self._root.logging = {"stream_to_client": bool(stream_to_client),
                              "aggregate_window_sec": aggregate_window_sec, "level": level}
        state = procs.existing_procs(self)
        if state is None or state.stopped:
            return Future.ready(None)
        return state.set_log_level(level)

    # -- identity ----------------------------------------------------------------
    def _same_mesh(self, other: "ProcMesh") -> bool:
        return self._root is other._root and self._view == other._view

    def _describe(self) -> str:
        return self._view.shape_string()

    def __repr__(self) -> str:
        return f"<ProcMesh {self._view.shape_string()} ({self._view.layout_string()})>"

    def __reduce__(self) -> Any:
        """A reference: an actor that receives the mesh spawns actors on the
        same processes (it owns those actor meshes). Tensors need the
        controller's session and stay there."""
        return (_rebuild_proc_mesh, (procs.procs_for(self).ref(), self._view))


def _rebuild_proc_mesh(ref: procs.ProcsRef, view: MeshView) -> ProcMesh:
    """A ProcMesh from its reference, in the process that unpickles it: the
    original mesh's root where that process spawned it, else a Root without
    a tensor session for the attached procs."""
    state = procs.from_ref(ref)
    root = state.root() if state.root is not None else None
    if root is None:
        if state.attached_root is None:
            state.attached_root = Root([(n, int(s)) for n, s in ref[1]], None)
        root = state.attached_root
        procs.adopt(ProcMesh(root, view), state)
    return ProcMesh(root, view)


_INT64_MAX = 2**63 - 1


def _check_int(name: str, value: Any, unit: str, minimum: int) -> None:
    """An int option of spawn_procs (the C++ controller takes an int64)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int ({unit}), got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be {'positive' if minimum else 'non-negative'}, "
                         f"got {value}")
    if value > _INT64_MAX:
        raise ValueError(f"{name} must be at most {_INT64_MAX}, got {value}")


def _per_host(per_host: Any) -> Dict[str, int]:
    """spawn_procs' shape: a dict of dimension sizes (or (name, size) pairs)."""
    if per_host is None:
        return {}
    if not isinstance(per_host, (str, bytes)):
        try:
            return dict(per_host)
        except (TypeError, ValueError):
            pass
    raise TypeError(f"spawn_procs takes per_host as a dict of dimension sizes (e.g. "
                    f"{{'gpu': 2}}), got {type(per_host).__name__}")


def spawn_procs(
    per_host: Optional[Dict[str, int]] = None,
    *,
    backend: Optional[str] = None,
    memory_cap: int = 0,
    timeout_ms: int = 60000,
    tensor_worker: str = "",
    hosts: Optional[Tuple[int, Optional[Dict[str, Any]]]] = None,
    **sizes: int,
) -> ProcMesh:
    _check_int("memory_cap", memory_cap, "bytes per worker", 0)
    _check_int("timeout_ms", timeout_ms, "milliseconds", 1)
    shape_dict: Dict[str, int] = _per_host(per_host)
    for name, size in sizes.items():
        if name in shape_dict:
            raise ValueError(f"spawn_procs: dimension '{name}' given twice (in per_host and "
                             "as a keyword)")
        shape_dict[name] = size
    if hosts is not None:  # {"hosts": N} + per_host: on the host agents, or local (source None)
        if "hosts" in shape_dict:
            raise ValueError("'hosts' is the host mesh's dim; name per-host dims otherwise")
        if not shape_dict and hosts[1] is not None:
            raise ValueError("spawn_procs on attached hosts needs a per-host dim, e.g. {'gpu': 1}")
        shape = [("hosts", hosts[0])] + list(shape_dict.items())
    elif not shape_dict:
        # Monarch's spawn_procs() with no per-host shape: one proc per host.
        shape = [("hosts", 1)]
    else:
        shape = list(shape_dict.items())
    view = MeshView.root(shape)  # validates names and sizes
    session = engine().start_session(shape, backend=backend, memory_cap=memory_cap,
                                     timeout_ms=timeout_ms, tensor_worker=tensor_worker,
                                     hosts=hosts[1] if hosts else None)
    mesh = ProcMesh(Root(shape, session), view)
    _spawned.append(weakref.ref(mesh))
    return mesh


#: The root meshes spawn_procs made, oldest first (shutdown_context stops the
#: live ones, newest first); dead references are dropped as new ones come.
_spawned: List["weakref.ref[ProcMesh]"] = []


def live_meshes() -> List[ProcMesh]:
    """The root proc meshes this process spawned that are not stopped,
    newest first."""
    _spawned[:] = [r for r in _spawned if (m := r()) is not None and not m._root.stopped]
    return [m for m in (r() for r in reversed(_spawned)) if m is not None]
