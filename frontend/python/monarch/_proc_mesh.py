"""Proc meshes: the root made by ``spawn_procs`` and its views."""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple, Union

from ._mesh_view import MeshView
from ._session import Session


class ProcMesh:
    """A mesh of processes (one tensor worker each), or a view of one."""

    def __init__(
        self,
        session: Session,
        view: MeshView,
        parent: Optional["ProcMesh"] = None,
        derivation: Optional[Tuple[str, Any]] = None,
    ):
        self._session = session
        self._view = view
        self._parent = parent
        self._derivation = derivation

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
        return ProcMesh(self._session, view, self, (kind, args))

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

    def ranks(self) -> list:
        """The global ranks of this view, row-major."""
        return self._view.ranks()

    # -- tensors -----------------------------------------------------------------
    @contextlib.contextmanager
    def activate(self) -> Iterator["ProcMesh"]:
        """Torch calls inside run on every rank of this mesh."""
        from ._tensor import activate

        with activate(self):
            yield self

    def rank(self, dims: Union[str, Sequence[str]]) -> Any:
        """A 0-d int64 distributed tensor: each proc's coordinate along dims."""
        from ._tensor import rank

        return rank(self, dims)

    def spawn(self, name: str, actor_class: Any, *args: Any, **kwargs: Any) -> Any:
        """``procs.spawn("trainers", Trainer, *args)``: one actor per rank of this
        view, on the mesh's actor worker processes (docs/python.md "Actors")."""
        from . import _actor_mesh

        return _actor_mesh.spawn(self, name, actor_class, *args, **kwargs)

    def stop(self) -> None:
        """Stops the mesh's worker processes (root meshes): tensor workers and
        the actor workers started by ``spawn``."""
        if self._parent is None:
            from . import _actor_mesh

            # Actor workers first: across hosts, stopping the session detaches
            # the agents, which would kill them rather than let them stop.
            try:
                _actor_mesh.stop_actor_procs(self)
            finally:
                self._session.stop()

    # -- identity ----------------------------------------------------------------
    def _same_mesh(self, other: "ProcMesh") -> bool:
        return self._session is other._session and self._view == other._view

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
    from . import _trace_mlir

    tracing = _trace_mlir.current() is not None and _trace_mlir.current().standalone
    session = Session(shape, backend=backend, memory_cap=memory_cap, timeout_ms=timeout_ms,
                      workers=not tracing, tensor_worker=tensor_worker,
                      hosts=hosts[1] if hosts else None)
    return ProcMesh(session, view)
