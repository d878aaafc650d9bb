"""``ValueMesh``: one value per rank of the mesh a ``call`` went to.

A value mesh is a mesh like the others: ``slice`` (an int removes the
dimension, a ``slice`` keeps it) and ``flatten`` give views of it, and its
points are :class:`~monarch._src.actor.shape.Point` s of its own extent, as
in Monarch.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..mesh.view import MeshView
from .shape import Extent, Point


def _plain(shape: List[Tuple[str, int]]) -> bool:
    """Whether ``shape`` is one MeshView.root takes (checked cheaply: every
    reply makes a value mesh)."""
    seen = set()
    for name, size in shape:
        if type(name) is not str or not name or name in seen or type(size) is not int \
                or size < 1:
            return False
        seen.add(name)
    return True


class ValueMesh:
    """One value per rank of the mesh a ``call`` went to."""

    def __init__(self, names: Sequence[str], sizes: Sequence[int], values: List[Any],
                 view: Optional[MeshView] = None):
        self._values = list(values)
        # The view picks this mesh's values out of self._values (by index);
        # for a whole mesh (every reply of a call) it is made when first asked.
        self._view_: Optional[MeshView] = view
        self._shape: List[Tuple[str, int]] = [] if view is not None else list(zip(names, sizes))
        # Indices into self._values in rank order (all of them for a whole mesh).
        self._ranks: Optional[List[int]] = None
        if view is None:
            if not _plain(self._shape):
                MeshView.root(self._shape)  # raises what is wrong with the shape
            count = 1
            for _, size in self._shape:
                count *= size
            if count != len(self._values):
                shape = ", ".join(f"{n}={s}" for n, s in self._shape)
                raise ValueError(f"a value mesh of {{{shape}}} needs {count} values, got "
                                 f"{len(self._values)}")
            self._ranks = list(range(count))

    @property
    def _view(self) -> MeshView:
        if self._view_ is None:
            self._view_ = MeshView.root(self._shape)
        return self._view_

    # -- shape ---------------------------------------------------------------------
    @property
    def _names(self) -> List[str]:
        return self._view.names

    @property
    def _sizes(self) -> List[int]:
        return self._view.sizes

    @property
    def sizes(self) -> Dict[str, int]:
        if self._view_ is None:
            return dict(self._shape)
        return dict(zip(self._view.names, self._view.sizes))

    @property
    def extent(self) -> Extent:
        return Extent(self._view.names, self._view.sizes)

    def size(self, dims: Union[None, str, Sequence[str]] = None) -> int:
        return self._view.size(dims)

    def __len__(self) -> int:
        return len(self._rank_list())

    # -- views -----------------------------------------------------------------------
    def slice(self, **coords: Any) -> "ValueMesh":
        """``vm.slice(host=1)`` drops the dimension, ``vm.slice(gpu=slice(0, 2))``
        keeps it; the values stay with their ranks."""
        return ValueMesh((), (), self._values, self._view.slice(**coords))

    def flatten(self, name: str) -> "ValueMesh":
        """All dimensions as one, ``name``, in rank order (a dense mesh only)."""
        return ValueMesh((), (), self._values, self._view.flatten(name))

    def rename(self, **renames: str) -> "ValueMesh":
        return ValueMesh((), (), self._values, self._view.rename(renames))

    # -- values ----------------------------------------------------------------------
    def _rank_list(self) -> List[int]:
        if self._ranks is None:
            self._ranks = self._view.ranks()
        return self._ranks

    def _index(self, coords: Dict[str, int]) -> int:
        names, sizes = self._view.names, self._view.sizes
        unknown = set(coords) - set(names)
        if unknown:
            raise KeyError(f"no dimension {sorted(unknown)} in value mesh of dims {names}")
        position = []
        for name, size in zip(names, sizes):
            if name not in coords:
                if size != 1:
                    raise KeyError(
                        f"item() needs a coordinate for dimension '{name}' (size {size})")
                c = 0
            else:
                c = coords[name]
                if isinstance(c, bool) or not isinstance(c, int):
                    raise TypeError(f"coordinate of '{name}' must be an int, got "
                                    f"{type(c).__name__}")
                if not 0 <= c < size:
                    raise IndexError(f"coordinate {name}={c} out of range (size {size})")
            position.append(c)
        return self._view.rank_at(position)

    def item(self, **coords: int) -> Any:
        """The value at ``coords``; with none, the only value of a mesh of one."""
        return self._values[self._index(coords)]

    def get(self, rank: int) -> Any:
        """The value of the ``rank``-th point (row-major)."""
        ranks = self._rank_list()
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise TypeError(f"rank must be an int, got {type(rank).__name__}")
        if not 0 <= rank < len(ranks):
            raise IndexError(f"rank {rank} out of range for a value mesh of {len(ranks)}")
        return self._values[ranks[rank]]

    def items(self) -> List[Tuple[Point, Any]]:
        """``[(point, value)]`` in rank order; each point is a :class:`Point` of
        this mesh's extent (it compares equal to a dict of its coordinates)."""
        extent = self.extent
        return [(Point(i, extent), self._values[r]) for i, r in enumerate(self._rank_list())]

    def values(self) -> List[Any]:
        if self._view_ is None:
            return list(self._values)  # the whole mesh
        return [self._values[r] for r in self._rank_list()]

    def __iter__(self) -> Iterator[Tuple[Point, Any]]:
        return iter(self.items())

    def __reduce__(self) -> Tuple[Any, ...]:
        return (ValueMesh, (self._view.names, self._view.sizes, self.values()))

    def __repr__(self) -> str:
        return f"<ValueMesh {self._view.shape_string()} {self.values()!r}>"
