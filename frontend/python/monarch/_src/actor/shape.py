"""``Extent`` and ``Point``: the sizes of a mesh and one position in it, as
Monarch defines them (docs/python.md, "Monarch compatibility").

Both are read-only mappings from dimension name to int -- an extent to each
dimension's size, a point to its coordinate -- so ``point["gpu"]``,
``dict(point)`` and ``mesh.slice(**point)`` work. A point is a rank of an
extent, counted row-major (the last dimension varies fastest).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator, List, Sequence, Tuple

__all__ = ["DimensionError", "Extent", "Point"]


class DimensionError(KeyError, ValueError):
    """A dimension name the extent does not have. Monarch raises ValueError
    here; a mapping raises KeyError (what ``in`` and ``.get`` rely on), so
    this is both."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Extent(Mapping):
    """Named dimension sizes: ``Extent(["host", "gpu"], [2, 4])``, a mapping
    ``{"host": 2, "gpu": 4}`` with ``labels``, ``sizes`` and ``nelements``."""

    __slots__ = ("_labels", "_sizes")

    def __init__(self, labels: Sequence[str], sizes: Sequence[int]):
        for what, seq in (("labels", labels), ("sizes", sizes)):
            if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
                raise TypeError(f"Extent {what} are a list, got {type(seq).__name__}")
        labels = list(labels)
        sizes = list(sizes)
        if len(labels) != len(sizes):
            raise ValueError(
                f"Extent needs one size per label: {len(labels)} labels, {len(sizes)} sizes")
        if len(set(labels)) != len(labels):
            raise ValueError(f"Extent labels must be distinct, got {labels}")
        for label, size in zip(labels, sizes):
            if not isinstance(label, str):
                raise TypeError(f"Extent labels must be str, got {type(label).__name__}")
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise TypeError(f"size of '{label}' must be a non-negative int, got {size!r}")
        self._labels: Tuple[str, ...] = tuple(labels)
        self._sizes: Tuple[int, ...] = tuple(sizes)

    @property
    def labels(self) -> List[str]:
        return list(self._labels)

    @property
    def sizes(self) -> List[int]:
        return list(self._sizes)

    @property
    def nelements(self) -> int:
        """The number of ranks (1 for an extent without dimensions)."""
        total = 1
        for size in self._sizes:
            total *= size
        return total

    def _position(self, label: str) -> int:
        try:
            return self._labels.index(label)
        except ValueError:
            raise DimensionError(f"Dimension '{label}' not found (dimensions: "
                                 f"{', '.join(self._labels) or 'none'})") from None

    def __getitem__(self, label: str) -> int:
        return self._sizes[self._position(label)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def __contains__(self, label: object) -> bool:
        return label in self._labels

    def coordinates(self, rank: int) -> List[int]:
        """The coordinates of ``rank`` (row-major)."""
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise TypeError(f"rank must be an int, got {type(rank).__name__}")
        if not 0 <= rank < self.nelements:
            raise IndexError(f"rank {rank} out of range for extent {self} "
                             f"({self.nelements} ranks)")
        coords = []
        for size in reversed(self._sizes):
            coords.append(rank % size)
            rank //= size
        coords.reverse()
        return coords

    def rank_of(self, coords: Sequence[int]) -> int:
        """The rank at ``coords`` (row-major)."""
        coords = list(coords)
        if len(coords) != len(self._labels):
            raise ValueError(f"rank_of needs {len(self._labels)} coordinates, got {len(coords)}")
        rank = 0
        for label, size, c in zip(self._labels, self._sizes, coords):
            if isinstance(c, bool) or not isinstance(c, int):
                raise TypeError(f"coordinate of '{label}' must be an int, got {type(c).__name__}")
            if not 0 <= c < size:
                raise IndexError(f"coordinate {label}={c} out of range (size {size})")
            rank = rank * size + c
        return rank

    def points(self) -> Iterator["Point"]:
        """Every point of the extent, in rank order."""
        return (Point(r, self) for r in range(self.nelements))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Extent):
            return self._labels == other._labels and self._sizes == other._sizes
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._labels, self._sizes))

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Extent, (list(self._labels), list(self._sizes)))

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{n}: {s}" for n, s in zip(self._labels, self._sizes)) + "}"


class Point(Mapping):
    """Rank ``rank`` of ``extent``: a mapping from dimension name to
    coordinate (``point["gpu"]``), with ``.rank``, ``.extent`` and
    ``.size(label)``. Prints as ``{'host': 1/2, 'gpu': 0/4}``. Equal to
    another point of the same rank and extent, and to any mapping of the
    same coordinates (``point == {"host": 1, "gpu": 0}``)."""

    __slots__ = ("_rank", "_extent", "_coords")

    def __init__(self, rank: int, extent: Extent):
        if not isinstance(extent, Extent):
            raise TypeError(f"Point needs an Extent, got {type(extent).__name__}")
        self._coords: Tuple[int, ...] = tuple(extent.coordinates(rank))
        self._rank = int(rank)
        self._extent = extent

    @classmethod
    def of(cls, coords: Mapping, sizes: Mapping) -> "Point":
        """The point at ``coords`` ({"gpu": 1}) of an extent of ``sizes``
        ({"gpu": 4}); both name the same dimensions, in the extent's order."""
        extent = Extent(list(sizes), list(sizes.values()))
        if set(coords) != set(sizes):
            raise ValueError(f"coordinates {dict(coords)} do not name the dimensions of "
                             f"{extent}")
        return cls(extent.rank_of([int(coords[n]) for n in extent.labels]), extent)

    @property
    def rank(self) -> int:
        """The row-major index of the point in its extent."""
        return self._rank

    @property
    def extent(self) -> Extent:
        return self._extent

    def size(self, label: str) -> int:
        """The size of dimension ``label``."""
        return self._extent[label]

    def __getitem__(self, label: str) -> int:
        return self._coords[self._extent._position(label)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._extent._labels)

    def __len__(self) -> int:
        return len(self._coords)

    def __contains__(self, label: object) -> bool:
        return label in self._extent._labels

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Point):
            return self._rank == other._rank and self._extent == other._extent
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._rank, self._extent))

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Point, (self._rank, self._extent))

    def __repr__(self) -> str:
        return "{" + ", ".join(
            f"'{n}': {c}/{s}"
            for n, c, s in zip(self._extent._labels, self._coords, self._extent._sizes)) + "}"
