"""Tracing a program to the monarch MLIR dialect (docs/dialect.md).

While a :class:`Tracer` is current, every operation the frontend captures is
written as dialect IR instead of being sent to workers. ``monarch.trace``,
``monarch.compile`` and ``python -m monarch.trace`` use it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from ..common.future import Future
from .core import TensorCore, fake_mode, new_dtensor
from .values import DTYPE_NAME, MLIR_ELEMENT, mlir_float, mlir_ident, mlir_string, to_attr

_current: Optional["Tracer"] = None


def current() -> Optional["Tracer"]:
    return _current


def sink_for(session: Any) -> Any:
    """Where an operation on ``session``'s meshes goes: the current tracer
    while tracing, else the session's eager sink (one instruction each)."""
    return _current if _current is not None else session.eager


class TracedValue:
    """What ``get()`` returns while tracing: the value exists only at run time."""

    def __init__(self, name: str, shape: Tuple[int, ...], dtype: torch.dtype):
        self.name = name
        self.shape = shape
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"<traced value {self.name}: shape={self.shape}, dtype={self.dtype}>"


def mesh_type(view: Any) -> str:
    return "!monarch.mesh<" + ", ".join(f"{mlir_ident(d.name)} = {d.size}" for d in view.dims) + ">"


def _mesh_dims(view: Any) -> str:
    return "<" + ", ".join(f"{mlir_ident(d.name)} = {d.size}" for d in view.dims) + ">"


def local_type(shape: Sequence[int], dtype: torch.dtype) -> str:
    elt = MLIR_ELEMENT[dtype]
    return "x".join([str(s) for s in shape] + [elt])


def tensor_type(t: Any, mesh: Any = None) -> str:
    mesh = mesh if mesh is not None else t._mesh
    stream = t._ref.stream.ir_name
    s = f", stream = {mlir_string(stream)}" if stream else ""
    return f"!monarch.tensor<{local_type(t.shape, t.dtype)}, {_mesh_dims(mesh._view)}{s}>"


def _slice_entry(name: str, v: Any) -> str:
    if isinstance(v, (slice, range)):
        a = "" if v.start is None else str(v.start)
        b = "" if v.stop is None else str(v.stop)
        step = "" if v.step in (None, 1) else f":{v.step}"
        return f"{mlir_ident(name)} = {a}:{b}{step}"
    return f"{mlir_ident(name)} = {v}"


def _mlir_loc(loc: str) -> str:
    """The Python line that issued an op, as an MLIR location: the plan
    lowering copies it into Instruction.location, so a failure of the compiled
    program names the same line as the eager one."""
    if not loc:
        return ""
    path, _, line = loc.rpartition(":")
    if not path or not line.isdigit():
        return ""
    return f" loc({mlir_string(path)}:{line}:0)"


class Tracer:
    def __init__(self, standalone: bool = False):
        self.standalone = standalone
        self.lines: List[str] = []
        self._n = 0
        self._roots: Dict[int, str] = {}
        self._meshes: Dict[Tuple[int, Any], str] = {}
        self._tensors: Dict[Tuple[int, Any], str] = {}
        self._streams: Dict[str, str] = {}
        self._borrows: Dict[int, str] = {}
        self._keep: List[Any] = []

    # -- names -----------------------------------------------------------------------
    def _fresh(self, prefix: str) -> str:
        self._n += 1
        return f"%{prefix}{self._n}"

    def _emit(self, line: str, loc: str = "") -> None:
        self.lines.append("    " + line + _mlir_loc(loc))

    def mesh(self, mesh: Any) -> str:
        key = (id(mesh._session), mesh._view)
        name = self._meshes.get(key)
        if name is not None:
            return name
        if mesh._parent is None:
            sid = id(mesh._session)
            if sid not in self._roots:
                self._keep.append(mesh._session)
                root = self._fresh("mesh")
                self._emit(f"{root} = monarch.spawn_procs : {mesh_type(mesh._view)}")
                self._roots[sid] = root
            name = self._roots[sid]
        else:
            parent = self.mesh(mesh._parent)
            ptype = mesh_type(mesh._parent._view)
            kind, args = mesh._derivation
            name = self._fresh("mesh")
            if kind == "rename":
                body = ", ".join(f"{mlir_ident(a)} -> {mlir_ident(b)}" for a, b in args.items())
                self._emit(f"{name} = monarch.rename {parent} ({body}) : {ptype}")
            elif kind == "split":
                dims, sizes = args
                parts = [
                    f"{mlir_ident(a)} -> [" + ", ".join(mlir_ident(n) for n in names) + "]"
                    for a, names in dims.items()
                ]
                parts += [f"{mlir_ident(a)} = {v}" for a, v in sizes.items()]
                self._emit(f"{name} = monarch.split {parent} ({', '.join(parts)}) : {ptype}")
            elif kind == "slice":
                body = ", ".join(_slice_entry(a, v) for a, v in args.items())
                self._emit(f"{name} = monarch.slice {parent} ({body}) : {ptype}")
            elif kind == "flatten":
                self._emit(f"{name} = monarch.flatten {parent} -> {mlir_ident(args)} : {ptype}")
        self._meshes[key] = name
        return name

    def _key(self, t: Any) -> Tuple[int, Any]:
        return (id(t._ref), t._mesh._view)

    def tensor(self, t: Any) -> str:
        name = self._tensors.get(self._key(t))
        if name is None:
            raise RuntimeError(
                f"{t!r} was created outside the traced program; create it inside the traced "
                "function (or pass what it is made from)"
            )
        return name

    def _define(self, t: Any) -> str:
        name = self._fresh("t")
        self._keep.append(t._ref)
        self._tensors[self._key(t)] = name
        return name

    def stream(self, stream: Any) -> str:
        key = stream.ir_name
        name = self._streams.get(key)
        if name is None:
            name = self._fresh("stream")
            self._emit(f"{name} = monarch.stream_create : !monarch.stream<{mlir_string(key)}>")
            self._streams[key] = name
        return name

    # -- sink interface -----------------------------------------------------------------
    def op(self, func: Any, args: Tuple, kwargs: Dict[str, Any], results: List[Any],
           consts: Dict[int, torch.Tensor], mesh: Any, stream: Any, loc: str) -> None:
        schema = func._schema
        m = self.mesh(mesh)
        if schema.name in ("aten::lift_fresh", "aten::lift", "aten::lift_fresh_copy"):
            src = args[0]
            if src.dim() != 0:
                raise NotImplementedError(
                    "tracing a constant tensor (torch.tensor(...) inside activate) with more "
                    "than one element is not supported yet; build it from torch.arange/full"
                )

        # 0-d local constants become aten::scalar_tensor on the mesh.
        const_names: Dict[int, Any] = {}

        def materialize(c: torch.Tensor) -> Any:
            with fake_mode:
                fake = torch.empty((), dtype=c.dtype)
            d = new_dtensor(fake, mesh, stream)
            value = c.item()
            if isinstance(value, bool):
                sc = f"#monarch.scalar<{'true' if value else 'false'}>"
            elif isinstance(value, int):
                sc = f"#monarch.scalar<{value} : i64>"
            else:
                sc = f"#monarch.scalar<{mlir_float(float(value))} : f64>"
            name = self._define(d)
            self._emit(
                f'{name} = monarch.aten "aten::scalar_tensor"({sc}, '
                f"#monarch.dtype<{DTYPE_NAME[c.dtype]}>, #monarch.none, #monarch.none, "
                f"#monarch.none) on {m} : () -> {tensor_type(d, mesh)}"
            , loc)
            return d

        def sub(x: Any) -> Any:
            if isinstance(x, torch.Tensor) and not isinstance(x, TensorCore):
                if id(x) not in const_names:
                    const_names[id(x)] = materialize(x)
                return const_names[id(x)]
            if isinstance(x, (list, tuple)):
                return type(x)(sub(i) for i in x)
            return x

        parts: List[str] = []
        operands: List[Any] = []
        for i, a in enumerate(schema.arguments):
            if i < len(args):
                v = args[i]
            elif a.name in kwargs:
                v = kwargs[a.name]
            elif a.has_default_value():
                v = a.default_value
            else:
                v = None
            v = sub(v)
            text, ops = to_attr(v, str(a.type), self.tensor)
            parts.append(text)
            operands.extend(ops)
        in_types = ", ".join(tensor_type(o) for o in operands)
        res_names = [self._define(r) for r in results]
        res_types = [tensor_type(r) for r in results]
        if len(res_types) == 1:
            rt = res_types[0]
        else:
            rt = "(" + ", ".join(res_types) + ")"
        lhs = (", ".join(res_names) + " = ") if res_names else ""
        op_name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        tail = "" if (operands or results) else f" in {mesh_type(mesh._view)}"
        self._emit(
            f"{lhs}monarch.aten {mlir_string(op_name)}({', '.join(parts)}) on {m} : "
            f"({in_types}) -> {rt}{tail}"
        , loc)

    def rank(self, mesh: Any, dims: Sequence[str], result: Any, stream: Any, loc: str) -> None:
        m = self.mesh(mesh)
        name = self._define(result)
        self._emit(
            f"{name} = monarch.rank {m} ({', '.join(mlir_ident(d) for d in dims)}) : "
            f"{tensor_type(result)}"
        , loc)

    def reduce(self, t: Any, result: Any, dims: Sequence[str], reduction: str, scatter: bool,
               inplace: bool, out: Any, stream: Any, loc: str) -> None:
        self.mesh(t._mesh)
        src = self.tensor(t)
        flags = " scatter" if scatter else ""
        flags += " inplace" if inplace else ""
        if out is not None:
            o = self.tensor(out)
            name = self._fresh("t")
            self._emit(
                f"{name} = monarch.reduce {src} ({', '.join(mlir_ident(d) for d in dims)}) "
                f"{reduction}{flags} into {o} : {tensor_type(t)}, {tensor_type(out)} -> "
                f"{tensor_type(out)}"
            , loc)
            return
        name = self._fresh("t") if inplace else self._define(result)
        self._emit(
            f"{name} = monarch.reduce {src} ({', '.join(mlir_ident(d) for d in dims)}) "
            f"{reduction}{flags} : {tensor_type(t)} -> {tensor_type(result)}"
        , loc)

    def send(self, t: Any, result: Any, dest: Any, stream: Any, loc: str) -> None:
        src = self.tensor(t)
        d = self.mesh(dest)
        name = self._define(result)
        self._emit(f"{name} = monarch.to_mesh {src} to {d} : {tensor_type(t)} -> {tensor_type(result)}", loc)

    def slice_mesh(self, t: Any, result: Any, coords: Dict[str, Any], loc: str) -> None:
        src = self.tensor(t)
        self.mesh(result._mesh)
        name = self._define(result)
        body = ", ".join(_slice_entry(a, v) for a, v in coords.items())
        self._emit(
            f"{name} = monarch.slice_mesh {src} ({body}) : {tensor_type(t)} -> "
            f"{tensor_type(result)}"
        , loc)

    def borrow(self, t: Any, result: Any, b: Any, loc: str) -> None:
        src = self.tensor(t)
        s = self.stream(b._stream)
        name = self._define(result)
        bname = self._fresh("borrow")
        self._borrows[id(b)] = bname
        self._keep.append(b)
        mut = " mutable" if b.mutable else ""
        self._emit(
            f"{name}, {bname} = monarch.borrow {src} to {s}{mut} : {tensor_type(t)} -> "
            f"{tensor_type(result)}"
        , loc)

    def drop(self, b: Any, loc: str) -> None:
        self._emit(f"monarch.borrow_drop {self._borrows[id(b)]}", loc)

    def fetch(self, t: Any, coords: Dict[str, int], loc: str) -> Any:
        src = self.tensor(t)
        name = self._fresh("fetch")
        at = ", ".join(f"{mlir_ident(k)} = {v}" for k, v in coords.items())
        self._emit(
            f"{name} = monarch.fetch_shard {src} at ({at}) : {tensor_type(t)} -> "
            f"!monarch.host<tensor<{local_type(t.shape, t.dtype)}>>"
        , loc)
        return Future.ready(TracedValue(name, tuple(t.shape), t.dtype))

    # -- output ------------------------------------------------------------------------
    def to_mlir(self, name: str = "main") -> str:
        body = "\n".join(self.lines)
        return (
            "module {\n"
            f"  func.func @{name}() {{\n"
            + (body + "\n" if body else "")
            + "    return\n  }\n}\n"
        )


@contextlib.contextmanager
def tracing(tracer: Tracer) -> Iterator[Tracer]:
    global _current
    prev = _current
    _current = tracer
    try:
        yield tracer
    finally:
        _current = prev
