"""Converting ATen call arguments to plan ``Value``s and MLIR attributes."""

from __future__ import annotations

import math
import re
import struct
from typing import Any, Callable, List, Tuple

import torch

from ..backend.plan import plan
from .core import TensorCore

DTYPE_TO_PLAN = {
    torch.uint8: plan.UINT8,
    torch.int8: plan.INT8,
    torch.int16: plan.INT16,
    torch.int32: plan.INT32,
    torch.int64: plan.INT64,
    torch.float16: plan.FLOAT16,
    torch.float32: plan.FLOAT32,
    torch.float64: plan.FLOAT64,
    torch.bool: plan.BOOL,
    torch.bfloat16: plan.BFLOAT16,
    torch.complex64: plan.COMPLEX64,
    torch.complex128: plan.COMPLEX128,
}
PLAN_TO_DTYPE = {v: k for k, v in DTYPE_TO_PLAN.items()}

DTYPE_NAME = {
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
    torch.bool: "bool",
    torch.bfloat16: "bfloat16",
}

MLIR_ELEMENT = {
    torch.uint8: "ui8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float16: "f16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.bool: "i1",
    torch.bfloat16: "bf16",
    torch.complex64: "complex<f32>",
    torch.complex128: "complex<f64>",
}

LAYOUT_TO_PLAN = {torch.strided: plan.STRIDED, torch.sparse_coo: plan.SPARSE_COO}
LAYOUT_NAME = {torch.strided: "strided", torch.sparse_coo: "sparse_coo"}
MEMORY_FORMAT_TO_PLAN = {
    torch.contiguous_format: plan.CONTIGUOUS_FORMAT,
    torch.preserve_format: plan.PRESERVE_FORMAT,
    torch.channels_last: plan.CHANNELS_LAST,
    torch.channels_last_3d: plan.CHANNELS_LAST_3D,
}
MEMORY_FORMAT_NAME = {
    torch.contiguous_format: "contiguous_format",
    torch.preserve_format: "preserve_format",
    torch.channels_last: "channels_last",
    torch.channels_last_3d: "channels_last_3d",
}


def tensor_data(t: torch.Tensor) -> "plan.TensorData":
    t = t.detach().to("cpu").contiguous()
    if t.dtype not in DTYPE_TO_PLAN:
        raise TypeError(f"dtype {t.dtype} cannot be sent to workers")
    data = plan.TensorData(dtype=DTYPE_TO_PLAN[t.dtype], shape=list(t.shape))
    if t.dtype == torch.bfloat16:
        raw = t.view(torch.int16).numpy().tobytes()
    else:
        raw = t.numpy().tobytes()
    data.data = raw
    return data


def from_tensor_data(d: "plan.TensorData") -> torch.Tensor:
    dtype = PLAN_TO_DTYPE[d.dtype]
    shape = list(d.shape)
    if len(d.data) == 0:
        return torch.zeros(shape, dtype=dtype)
    if dtype == torch.bfloat16:
        base = torch.frombuffer(bytearray(d.data), dtype=torch.int16).view(torch.bfloat16)
    else:
        base = torch.frombuffer(bytearray(d.data), dtype=dtype)
    return base.reshape(shape).clone()


PLAN_TO_LAYOUT = {v: k for k, v in LAYOUT_TO_PLAN.items()}
PLAN_TO_MEMORY_FORMAT = {v: k for k, v in MEMORY_FORMAT_TO_PLAN.items()}


def from_value(v: "plan.Value", ref: Callable[[int], Any],
               tensor: Callable[["plan.TensorData"], Any] = from_tensor_data,
               device: Callable[[str], Any] = torch.device) -> Any:
    """A plan Value as the Python value an op or function takes (to_value's
    inverse): ``ref`` resolves a ref, ``tensor`` makes a constant tensor and
    ``device`` a device from its spec (the simulation maps ``cuda`` to the
    CPU without a GPU; a native worker's rref puts tensors on their device)."""
    k = v.WhichOneof("kind")
    if k in ("int_value", "float_value", "bool_value", "string_value"):
        return getattr(v, k)
    if k in ("int_list", "float_list", "bool_list"):
        return list(getattr(v, k).values)
    if k == "dtype":
        return PLAN_TO_DTYPE[v.dtype]
    if k == "device":
        return device(v.device.spec)
    if k == "layout":
        return PLAN_TO_LAYOUT[v.layout]
    if k == "memory_format":
        return PLAN_TO_MEMORY_FORMAT[v.memory_format]
    if k == "none" or k is None:
        return None
    if k == "scalar":
        return getattr(v.scalar, v.scalar.WhichOneof("kind"))
    if k == "ref":
        return ref(v.ref)
    if k == "ref_list":
        return [ref(r) for r in v.ref_list.refs]
    if k == "list":
        return [from_value(e, ref, tensor, device) for e in v.list.values]
    if k == "optional":
        return from_value(v.optional.value, ref, tensor, device) \
            if v.optional.HasField("value") else None
    if k == "tensor":
        return tensor(v.tensor)
    raise RuntimeError(f"unknown value kind {k}")


def to_value(x: Any, type_str: str, ref_of: Callable[[Any], int]) -> "plan.Value":
    """One argument as a plan Value. ``ref_of`` maps distributed tensors to refs."""
    v = plan.Value()
    if isinstance(x, TensorCore):
        v.ref = ref_of(x)
    elif x is None:
        v.none.SetInParent()
    elif isinstance(x, torch.Tensor):
        v.tensor.CopyFrom(tensor_data(x))
    elif isinstance(x, bool):
        if type_str in ("number", "Optional[number]"):
            v.scalar.bool_value = x
        else:
            v.bool_value = x
    elif isinstance(x, int):
        if type_str in ("number", "Optional[number]"):
            v.scalar.int_value = x
        else:
            v.int_value = x
    elif isinstance(x, float):
        if type_str in ("number", "Optional[number]"):
            v.scalar.float_value = x
        else:
            v.float_value = x
    elif isinstance(x, str):
        v.string_value = x
    elif isinstance(x, torch.dtype):
        v.dtype = DTYPE_TO_PLAN[x]
    elif isinstance(x, torch.device):
        v.device.spec = str(x)
    elif isinstance(x, torch.layout):
        v.layout = LAYOUT_TO_PLAN[x]
    elif isinstance(x, torch.memory_format):
        v.memory_format = MEMORY_FORMAT_TO_PLAN[x]
    elif isinstance(x, (list, tuple)):
        items = list(x)
        if "Tensor" in type_str and "Optional[Tensor]" not in type_str and all(
            isinstance(i, TensorCore) for i in items
        ):
            v.ref_list.refs.extend(ref_of(i) for i in items)
        elif "Tensor" in type_str or any(
            isinstance(i, (torch.Tensor, type(None))) for i in items
        ):
            for i in items:
                v.list.values.append(to_value(i, "Optional[Tensor]", ref_of))
        elif all(isinstance(i, bool) for i in items) and (items or "bool" in type_str):
            v.bool_list.values.extend(items)
        elif all(isinstance(i, int) and not isinstance(i, bool) for i in items) and (
            items or "float" not in type_str
        ):
            v.int_list.values.extend(items)
        elif all(isinstance(i, (int, float)) and not isinstance(i, bool) for i in items):
            v.float_list.values.extend(float(i) for i in items)
        else:
            for i in items:
                v.list.values.append(to_value(i, "", ref_of))
    else:
        raise TypeError(f"cannot send an argument of type {type(x).__name__} to workers")
    return v


# -- MLIR ----------------------------------------------------------------------


def mlir_float(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        bits = struct.unpack("<Q", struct.pack("<d", x))[0]
        return f"0x{bits:016X}"
    return f"{x:.17e}"


def mlir_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in ('"', "\\") or ord(ch) < 0x20 or ord(ch) >= 0x7F:
            for b in ch.encode("utf-8"):
                out.append(f"\\{b:02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def to_attr(x: Any, type_str: str, name_of: Callable[[Any], str]) -> Tuple[str, List[Any]]:
    """One argument in the monarch.aten syntax; returns (text, tensor operands)."""
    is_scalar = type_str in ("number", "Optional[number]")
    if isinstance(x, TensorCore):
        return name_of(x), [x]
    if x is None:
        return "#monarch.none", []
    if isinstance(x, bool):
        b = "true" if x else "false"
        return (f"#monarch.scalar<{b}>" if is_scalar else b), []
    if isinstance(x, int):
        return (f"#monarch.scalar<{x} : i64>" if is_scalar else f"{x} : i64"), []
    if isinstance(x, float):
        f = mlir_float(x)
        return (f"#monarch.scalar<{f} : f64>" if is_scalar else f"{f} : f64"), []
    if isinstance(x, str):
        return mlir_string(x), []
    if isinstance(x, torch.dtype):
        return f"#monarch.dtype<{DTYPE_NAME[x]}>", []
    if isinstance(x, torch.device):
        return f"#monarch.device<{mlir_string(str(x))}>", []
    if isinstance(x, torch.layout):
        return f"#monarch.layout<{LAYOUT_NAME[x]}>", []
    if isinstance(x, torch.memory_format):
        return f"#monarch.memory_format<{MEMORY_FORMAT_NAME[x]}>", []
    if isinstance(x, (list, tuple)):
        items = list(x)
        if "Tensor" in type_str or any(isinstance(i, TensorCore) for i in items):
            parts, ops = [], []
            for i in items:
                t, o = to_attr(i, "Optional[Tensor]", name_of)
                parts.append(t)
                ops.extend(o)
            return "[" + ", ".join(parts) + "]", ops
        if "bool" in type_str or (items and all(isinstance(i, bool) for i in items)):
            body = ", ".join("true" if i else "false" for i in items)
            return (f"array<i1: {body}>" if items else "array<i1>"), []
        if "float" in type_str or any(isinstance(i, float) for i in items):
            body = ", ".join(mlir_float(float(i)) for i in items)
            return (f"array<f64: {body}>" if items else "array<f64>"), []
        body = ", ".join(str(int(i)) for i in items)
        return (f"array<i64: {body}>" if items else "array<i64>"), []
    raise TypeError(f"cannot trace an argument of type {type(x).__name__}")


def mlir_ident(name: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name):
        return name
    return mlir_string(name)
