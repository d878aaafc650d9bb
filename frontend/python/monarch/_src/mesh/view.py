"""Affine views of a root proc mesh (DESIGN.md §6.1, docs/meshes.md).

A pure-Python mirror of ``runtime/mesh`` (``MeshView.cpp``): the same rules and
the same error messages, raised as the Python exception types Monarch uses
(``IndexError``, ``KeyError``, ``ValueError``, ``TypeError``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = ["Dim", "MeshView", "MeshKeyError", "dim_names"]


class MeshKeyError(KeyError):
    """A KeyError whose str() is the message itself (KeyError quotes it)."""

    def __str__(self) -> str:  # pragma: no cover - trivial
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Dim:
    name: str
    size: int
    stride: int


def dim_names(dims: Union[str, Sequence[str]], what: str) -> Tuple[str, ...]:
    """``dims`` as a tuple of names: one name (a str) or a sequence of them;
    anything else is a TypeError naming ``what`` took it."""
    if isinstance(dims, str):
        return (dims,)
    if isinstance(dims, (bytes, bytearray)) or not hasattr(dims, "__iter__"):
        raise TypeError(f"{what} takes a dimension name or a sequence of names, got "
                        f"{type(dims).__name__}")
    return tuple(dims)


def _describe_shape(dims: Sequence[Dim]) -> str:
    return "{" + ", ".join(f"{d.name}={d.size}" for d in dims) + "}"


def _join_names(dims: Sequence[Dim]) -> str:
    return ", ".join(d.name for d in dims) if dims else "none"


SliceArg = Union[int, slice, range]

#: The most ranks a mesh may hold (runtime/mesh: kMaxMeshRanks).
MAX_MESH_RANKS = 1 << 20


class MeshView:
    """``(offset, dims)``: the rank at coordinates c is offset + Σ cᵢ·strideᵢ."""

    __slots__ = ("offset", "dims")

    def __init__(self, offset: int, dims: Sequence[Dim]):
        self.offset = int(offset)
        self.dims: Tuple[Dim, ...] = tuple(dims)

    # -- construction -----------------------------------------------------
    @staticmethod
    def root(shape: Sequence[Tuple[str, int]]) -> "MeshView":
        dims: List[Dim] = []
        stride = 1
        for name, size in reversed(list(shape)):
            dims.append(Dim(name, size, stride))
            # create() says what is wrong with a size that is not an int.
            stride *= max(size, 1) if isinstance(size, int) else 1
        dims.reverse()
        return MeshView.create(0, dims)

    @staticmethod
    def create(offset: int, dims: Sequence[Dim]) -> "MeshView":
        if offset < 0:
            raise ValueError(f"mesh offset must be non-negative, got {offset}")
        seen = set()
        ranks = 1
        last = offset
        for d in dims:
            if not isinstance(d.name, str):
                raise TypeError(f"mesh dimension names must be str, got {type(d.name).__name__}")
            if isinstance(d.size, bool) or not isinstance(d.size, int):
                raise TypeError(
                    f"mesh dimension '{d.name}' must have an int size, got {type(d.size).__name__}"
                )
            if not d.name:
                raise ValueError("mesh dimension names must not be empty")
            if d.name in seen:
                raise ValueError(f"duplicate mesh dimension '{d.name}'")
            seen.add(d.name)
            if d.size < 1:
                raise ValueError(
                    f"mesh dimension '{d.name}' must have a positive size, got {d.size}"
                )
            if d.stride < 0:
                raise ValueError(
                    f"mesh dimension '{d.name}' must have a non-negative stride, got {d.stride}"
                )
            ranks *= d.size
            if ranks > MAX_MESH_RANKS:
                raise ValueError(f"a mesh holds at most {MAX_MESH_RANKS} ranks; "
                                 f"{_describe_shape(dims)} is larger")
            last += (d.size - 1) * d.stride
        if last >= MAX_MESH_RANKS:
            raise ValueError(f"mesh view (offset {offset}, {_describe_shape(dims)}) reaches past "
                             f"rank {MAX_MESH_RANKS - 1}, the largest a mesh may hold")
        return MeshView(offset, dims)

    # -- queries ------------------------------------------------------------
    @property
    def names(self) -> List[str]:
        return [d.name for d in self.dims]

    @property
    def sizes(self) -> List[int]:
        return [d.size for d in self.dims]

    @property
    def strides(self) -> List[int]:
        return [d.stride for d in self.dims]

    def find(self, name: str) -> Optional[int]:
        for i, d in enumerate(self.dims):
            if d.name == name:
                return i
        return None

    def lookup(self, name: str) -> int:
        if not isinstance(name, str):
            raise TypeError(f"mesh dimensions are named by str, got {type(name).__name__}")
        i = self.find(name)
        if i is None:
            raise MeshKeyError(
                f"mesh has no dimension '{name}' (dimensions: {_join_names(self.dims)})"
            )
        return i

    def size(self, names: Union[None, str, Sequence[str]] = None) -> int:
        if names is None:
            total = 1
            for d in self.dims:
                total *= d.size
            return total
        if isinstance(names, str):
            return self.dims[self.lookup(names)].size
        total = 1
        for n in dim_names(names, "size"):
            total *= self.dims[self.lookup(n)].size
        return total

    def rank_at(self, coords: Sequence[int]) -> int:
        if len(coords) != len(self.dims):
            raise ValueError(f"expected {len(self.dims)} coordinates, got {len(coords)}")
        rank = self.offset
        for c, d in zip(coords, self.dims):
            if c < 0 or c >= d.size:
                raise IndexError(
                    f"coordinate {c} out of range for dimension '{d.name}' of size {d.size}"
                )
            rank += c * d.stride
        return rank

    def coords(self) -> Iterator[Tuple[int, ...]]:
        return itertools.product(*[range(d.size) for d in self.dims])

    def ranks(self) -> List[int]:
        return [self.rank_at(c) for c in self.coords()]

    def coords_of(self, rank: int) -> Optional[Tuple[int, ...]]:
        for c in self.coords():
            if self.rank_at(c) == rank:
                return c
        return None

    # -- views --------------------------------------------------------------
    def slice_index(self, name: str, index: int) -> "MeshView":
        i = self.lookup(name)
        d = self.dims[i]
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(
                f"slice of dimension '{name}' takes an int or a slice, got {type(index).__name__}"
            )
        n = index + d.size if index < 0 else index
        if n < 0 or n >= d.size:
            raise IndexError(
                f"index {index} out of range for dimension '{d.name}' of size {d.size}"
            )
        dims = list(self.dims)
        del dims[i]
        return MeshView(self.offset + n * d.stride, dims)

    def slice_range(self, name: str, rng: Union[slice, range]) -> "MeshView":
        i = self.lookup(name)
        d = self.dims[i]
        for bound in (rng.start, rng.stop, rng.step):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
                raise TypeError(f"slice of dimension '{name}' takes int bounds (or None), got "
                                f"{type(bound).__name__}")
        step = 1 if rng.step is None else rng.step
        if step < 1:
            raise ValueError(
                f"slice step for dimension '{d.name}' must be positive, got {step}"
            )

        def norm(bound: Optional[int], fallback: int) -> int:
            if bound is None:
                return fallback
            return bound + d.size if bound < 0 else bound

        start = norm(rng.start, 0)
        stop = norm(rng.stop, d.size)
        if start < 0 or start >= d.size or stop > d.size or stop <= start:
            raise IndexError(
                f"range {start}:{stop} out of range for dimension '{d.name}' of size {d.size}"
            )
        dims = list(self.dims)
        dims[i] = Dim(d.name, (stop - start + step - 1) // step, d.stride * step)
        return MeshView(self.offset + start * d.stride, dims)

    def slice(self, **kwargs: SliceArg) -> "MeshView":
        view = self
        for name, arg in kwargs.items():
            if isinstance(arg, (slice, range)):
                view = view.slice_range(name, arg)
            else:
                view = view.slice_index(name, arg)
        return view

    def split(self, dims: Dict[str, Sequence[str]], sizes: Dict[str, int]) -> "MeshView":
        new_names: List[Optional[List[str]]] = [None] * len(self.dims)
        for old, names in dims.items():
            i = self.lookup(old)
            if isinstance(names, str):
                names = (names,)
            names = list(names)
            if new_names[i] is not None:
                raise ValueError(f"dimension '{old}' is split twice")
            if not names:
                raise ValueError(f"dimension '{old}' must be split into at least one name")
            for n in names:
                if not isinstance(n, str):
                    raise TypeError(
                        f"new dimension names must be str, got {type(n).__name__}"
                    )
            new_names[i] = names
        for name, size in sizes.items():
            if isinstance(size, bool) or not isinstance(size, int):
                raise TypeError(
                    f"size of '{name}' must be an int or a tuple of names, got {type(size).__name__}"
                )
            if size < 1:
                raise ValueError(f"size of '{name}' must be positive, got {size}")
        out: List[Dim] = []
        seen = set()
        used = set()
        for i, old in enumerate(self.dims):
            names = new_names[i]
            if names is None:
                if old.name in seen:
                    raise ValueError(f"duplicate dimension name '{old.name}'")
                seen.add(old.name)
                out.append(old)
                continue
            szs = [0] * len(names)
            known = 1
            unknown: Optional[int] = None
            for k, n in enumerate(names):
                if not n:
                    raise ValueError("dimension names must not be empty")
                if n in seen:
                    raise ValueError(f"duplicate dimension name '{n}'")
                seen.add(n)
                if n in sizes:
                    szs[k] = sizes[n]
                    known *= sizes[n]
                    used.add(n)
                elif unknown is not None:
                    raise ValueError(
                        f"cannot infer the sizes of both '{names[unknown]}' and '{n}' when "
                        f"splitting '{old.name}': give all but one"
                    )
                else:
                    unknown = k
            if unknown is not None:
                if old.size % known != 0:
                    raise ValueError(
                        f"sizes given for the split of '{old.name}' (product {known}) do not "
                        f"divide its size {old.size}"
                    )
                szs[unknown] = old.size // known
            elif known != old.size:
                raise ValueError(
                    f"sizes given for the split of '{old.name}' multiply to {known}, not its "
                    f"size {old.size}"
                )
            split: List[Dim] = []
            stride = old.stride
            for k in reversed(range(len(names))):
                split.append(Dim(names[k], szs[k], stride))
                stride *= szs[k]
            out.extend(reversed(split))
        for name in sizes:
            if name not in used:
                raise ValueError(
                    f"size given for '{name}', which is not a dimension created by this split"
                )
        return MeshView(self.offset, out)

    def rename(self, renames: Dict[str, str]) -> "MeshView":
        for new in renames.values():
            if not isinstance(new, str):
                raise TypeError(f"rename takes new names as str, got {type(new).__name__}")
        return self.split({old: (new,) for old, new in renames.items()}, {})

    def is_dense(self) -> bool:
        expected = 1
        for d in reversed(self.dims):
            if d.size == 1:
                continue
            if d.stride != expected:
                return False
            expected *= d.size
        return True

    def flatten(self, name: str) -> "MeshView":
        if not isinstance(name, str):
            raise TypeError(f"flatten takes the new dimension's name as a str, got "
                            f"{type(name).__name__}")
        if not name:
            raise ValueError("flatten needs a non-empty dimension name")
        if not self.is_dense():
            raise ValueError(
                f"cannot flatten mesh {self.layout_string()}: its ranks are not contiguous "
                "(flatten needs a dense view)"
            )
        return MeshView(self.offset, [Dim(name, self.size(), 1)])

    def group_of(self, rank: int, dims: Sequence[str]) -> List[int]:
        coords = self.coords_of(rank)
        if coords is None:
            raise IndexError(f"rank {rank} is not in mesh {self.layout_string()}")
        varying: List[int] = []
        if not dims:
            varying = list(range(len(self.dims)))
        for name in dims:
            i = self.lookup(name)
            if i in varying:
                raise ValueError(f"dimension '{name}' named twice")
            varying.append(i)
        out = []
        for gc in itertools.product(*[range(self.dims[i].size) for i in varying]):
            full = list(coords)
            for k, i in enumerate(varying):
                full[i] = gc[k]
            out.append(self.rank_at(full))
        return out

    # -- printing -----------------------------------------------------------
    def shape_string(self) -> str:
        return "{" + ", ".join(f"{d.name}={d.size}" for d in self.dims) + "}"

    def layout_string(self) -> str:
        return f"offset={self.offset}" + "".join(
            f" {d.name}={d.size}:{d.stride}" for d in self.dims
        )

    def to_table(self) -> str:
        if not self.dims:
            return f"rank {self.offset}\n"
        if len(self.dims) == 1:
            d = self.dims[0]
            header = [d.name] + [str(i) for i in range(d.size)]
            body = ["rank"] + [str(self.offset + i * d.stride) for i in range(d.size)]
            return _render_grid([header, body])
        n_outer = len(self.dims) - 2
        row_dim, col_dim = self.dims[n_outer], self.dims[n_outer + 1]
        out = ""
        for outer in itertools.product(*[range(d.size) for d in self.dims[:n_outer]]):
            base = self.offset
            title = []
            for i, c in enumerate(outer):
                base += c * self.dims[i].stride
                title.append(f"{self.dims[i].name}={c}")
            if title:
                out += ("" if not out else "\n") + ", ".join(title) + ":\n"
            rows = [[f"{row_dim.name}\\{col_dim.name}"] + [str(c) for c in range(col_dim.size)]]
            for r in range(row_dim.size):
                rows.append(
                    [str(r)]
                    + [
                        str(base + r * row_dim.stride + c * col_dim.stride)
                        for c in range(col_dim.size)
                    ]
                )
            out += _render_grid(rows)
        return out

    def key(self) -> Tuple:
        return (self.offset, self.dims)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MeshView) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"MeshView({self.layout_string()})"


def _render_grid(rows: List[List[str]]) -> str:
    widths: List[int] = []
    for row in rows:
        for c, cell in enumerate(row):
            if len(widths) <= c:
                widths.append(0)
            widths[c] = max(widths[c], len(cell))
    lines = []
    for row in rows:
        lines.append("  ".join(cell.rjust(widths[c]) for c, cell in enumerate(row)))
    return "\n".join(lines) + "\n"
