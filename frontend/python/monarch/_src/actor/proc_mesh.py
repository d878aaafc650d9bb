"""Proc meshes: the root made by ``spawn_procs`` and its views (DESIGN.md §6.1).

A root proc mesh has one tensor worker per rank (started by the tensor
engine: ``tensor_engine.py``) and, from the first ``spawn``, one actor worker
per rank (``procs.py``). Views -- ``rename``, ``split``, ``slice``,
``flatten`` -- are affine views of the root's ranks and share its processes.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..mesh.view import MeshView
from . import actor_mesh, procs
from .tensor_engine import engine


class Root:
    """What the views of one ``spawn_procs`` share: the shape and the tensor
    session (the tensor engine's; None while tracing without workers)."""

    __slots__ = ("shape", "session", "__weakref__")

    def __init__(self, shape: List[Tuple[str, int]], session: Any):
        self.shape = shape
        self.session = session


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
    def extent(self) -> Dict[str, int]:
        return self.sizes

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
        return actor_mesh.spawn(self, name, actor_class, *args, **kwargs)

    def stop(self) -> None:
        """Stops the mesh's worker processes (root meshes): tensor workers and
        the actor workers started by ``spawn``."""
        if self._parent is None:
            # Actor workers first: across hosts, stopping the session detaches
            # the agents, which would kill them rather than let them stop.
            try:
                procs.stop_actor_procs(self)
            finally:
                if self._root.session is not None:
                    self._root.session.stop()

    # -- identity ----------------------------------------------------------------
    def _same_mesh(self, other: "ProcMesh") -> bool:
        return self._root is other._root and self._view == other._view

    def _describe(self) -> str:
        return self._view.shape_string()

    def __repr__(self) -> str:
        return f"<ProcMesh {self._view.shape_string()} ({self._view.layout_string()})>"


def spawn_procs(
    per_host: Optional[Dict[str, int]] = None,
    *,
    backend: Optional[str] = None,
    memory_cap: int = 0,
    timeout_ms: int = 60000,
    tensor_worker: str = "",
    hosts: Optional[Tuple[int, Dict[str, Any]]] = None,
    **sizes: int,
) -> ProcMesh:
    shape_dict: Dict[str, int] = dict(per_host or {})
    shape_dict.update(sizes)
    if not shape_dict:
        raise ValueError("spawn_procs needs at least one dimension, e.g. {'gpu': 8}")
    shape = list(shape_dict.items())
    if hosts is not None:  # {"hosts": N} + per_host, on the host agents
        if "hosts" in shape_dict:
            raise ValueError("'hosts' is the host mesh's dim; name per-host dims otherwise")
        shape.insert(0, ("hosts", hosts[0]))
    view = MeshView.root(shape)  # validates names and sizes
    session = engine().start_session(shape, backend=backend, memory_cap=memory_cap,
                                     timeout_ms=timeout_ms, tensor_worker=tensor_worker,
                                     hosts=hosts[1] if hosts else None)
    return ProcMesh(Root(shape, session), view)
