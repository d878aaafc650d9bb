"""``ValueMesh``: one value per rank of the mesh a ``call`` went to."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Sequence, Tuple


class ValueMesh:
    """One value per rank of the mesh a ``call`` went to."""

    def __init__(self, names: Sequence[str], sizes: Sequence[int], values: List[Any]):
        self._names = list(names)
        self._sizes = list(sizes)
        self._values = list(values)

    @property
    def sizes(self) -> Dict[str, int]:
        return dict(zip(self._names, self._sizes))

    def _index(self, coords: Dict[str, int]) -> int:
        unknown = set(coords) - set(self._names)
        if unknown:
            raise KeyError(f"no dimension {sorted(unknown)} in value mesh of dims {self._names}")
        index = 0
        for name, size in zip(self._names, self._sizes):
            if name not in coords:
                if size != 1:
                    raise KeyError(f"item() needs a coordinate for dimension '{name}' (size {size})")
                c = 0
            else:
                c = int(coords[name])
                if not 0 <= c < size:
                    raise IndexError(f"coordinate {name}={c} out of range (size {size})")
            index = index * size + c
        return index

    def item(self, **coords: int) -> Any:
        return self._values[self._index(coords)]

    def _points(self) -> Iterator[Dict[str, int]]:
        for i in range(len(self._values)):
            rest, point = i, []
            for size in reversed(self._sizes):
                point.append(rest % size)
                rest //= size
            yield dict(zip(self._names, reversed(point)))

    def items(self) -> List[Tuple[Dict[str, int], Any]]:
        return list(zip(self._points(), self._values))

    def values(self) -> List[Any]:
        return list(self._values)

    def __iter__(self) -> Iterator[Tuple[Dict[str, int], Any]]:
        return iter(self.items())

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shape = ", ".join(f"{n}={s}" for n, s in zip(self._names, self._sizes))
        return f"<ValueMesh ({shape}) {self._values!r}>"
