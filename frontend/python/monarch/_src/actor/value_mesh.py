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


class ValueMesh:
    """One value per rank of the mesh a ``call`` went to."""

    def __init__(self, names: Sequence[str], sizes: Sequence[int], values: List[Any],
                 view: Optional[MeshView] = None):
        self._values = list(values)
        # The view picks this mesh's values out of self._values (by index).
        self._view = view if view is not None else MeshView.root(list(zip(names, sizes)))
        if view is None and self._view.size() != len(self._values):
            raise ValueError(f"a value mesh of {self._view.shape_string()} needs "
                             f"{self._view.size()} values, got {len(self._values)}")

    # -- shape ---------------------------------------------------------------------
    @property
    def _names(self) -> List[str]:
        return self._view.names

    @property
    def _sizes(self) -> List[int]:
        return self._view.sizes

    @property
    def sizes(self) -> Dict[str, int]:
        return dict(zip(self._view.names, self._view.sizes))

    @property
    def extent(self) -> Extent:
        return Extent(self._view.names, self._view.sizes)

    def size(self, dims: Union[None, str, Sequence[str]] = None) -> int:
        return self._view.size(dims)

    def __len__(self) -> int:
        return self._view.size()

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
    def _index(self, coords: Dict[str, int]) -> int:
        names, sizes = self._view.names, self._view.sizes
        unknown = set(coords) - set(names)
        if unknown:
            raise KeyError(f"no dimension {sorted(unknown)} in value mesh of dims {names}")
        position = []
        for name, size in zip(names, sizes):
            if name not in coords:
                if size != 1:
                    raise KeyError(f"item() needs a coordinate for dimension '{name}' (size {size})")
                c = 0
            else:
                c = int(coords[name])
                if not 0 <= c < size:
                    raise IndexError(f"coordinate {name}={c} out of range (size {size})")
            position.append(c)
        return self._view.rank_at(position)

    def item(self, **coords: int) -> Any:
        """The value at ``coords``; with none, the only value of a mesh of one."""
        return self._values[self._index(coords)]

    def get(self, rank: int) -> Any:
        """The value of the ``rank``-th point (row-major)."""
        ranks = self._view.ranks()
        if not 0 <= rank < len(ranks):
            raise IndexError(f"rank {rank} out of range for a value mesh of {len(ranks)}")
        return self._values[ranks[rank]]

    def items(self) -> List[Tuple[Point, Any]]:
        """``[(point, value)]`` in rank order; each point is a :class:`Point` of
        this mesh's extent (it compares equal to a dict of its coordinates)."""
        extent = self.extent
        return [(Point(i, extent), self._values[r]) for i, r in enumerate(self._view.ranks())]

    def values(self) -> List[Any]:
        return [self._values[r] for r in self._view.ranks()]

    def __iter__(self) -> Iterator[Tuple[Point, Any]]:
        return iter(self.items())

    def __reduce__(self) -> Tuple[Any, ...]:
        return (ValueMesh, (self._view.names, self._view.sizes, self.values()))

    def __repr__(self) -> str:
        return f"<ValueMesh {self._view.shape_string()} {self.values()!r}>"
