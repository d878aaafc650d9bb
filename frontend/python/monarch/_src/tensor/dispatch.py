"""The capture of torch calls at the ATen level (docs/python.md,
"Distributed tensors").

Under ``mesh.activate()`` a ``TorchDispatchMode`` (:class:`CaptureMode`)
receives every ATen call (factories included); ops on distributed tensors
outside ``activate`` reach :func:`dispatch` through the tensor class's
``__torch_dispatch__``. Each call is run on fake tensors for the result's
metadata and issued to the mesh (or to the tracer); autograd runs on the
controller above the dispatcher, so backward ops are captured the same way.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ..common.errors import usage
from ..common.location import user_location
from . import devices, modes
from .checks import check_mutate, check_use
from .core import HAS_CUDA, TensorCore, device_of, fake_mode, intended_device, new_dtensor
from .devices import DEVICE_FROM_INPUT, check_devices, device_mix
from .streams import Stream, get_active_stream
from .tracing import sink_for


class CaptureMode(TorchDispatchMode):
    """Every ATen call inside ``activate`` runs on the active mesh."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return dispatch(func, args, kwargs or {}, modes.active_mesh())


@contextlib.contextmanager
def activate(mesh: Any) -> Iterator[Any]:
    """Run torch calls inside on every rank of ``mesh``."""
    modes.push_mesh(mesh)
    entered = False
    fmode = None
    if modes.capture is None:
        if not HAS_CUDA:
            fmode = modes.function_mode = devices.CudaOnCpuMode()
            fmode.__enter__()
        modes.capture = CaptureMode()
        modes.capture.__enter__()
        entered = True
    try:
        yield mesh
    finally:
        modes.pop_mesh()
        if entered:
            mode, modes.capture = modes.capture, None
            mode.__exit__(None, None, None)
            if fmode is not None:
                modes.function_mode = None
                fmode.__exit__(None, None, None)


_LIFT = {"aten::lift_fresh", "aten::lift", "aten::lift_fresh_copy"}


def to_fake(x: Any) -> Any:
    if isinstance(x, TensorCore):
        return x._fake
    if isinstance(x, torch.device) and x.type == "cuda" and not HAS_CUDA:
        return torch.device("cpu")
    if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor):
        return fake_mode.from_tensor(x)
    return x


def _numbers_to_tensors(schema: Any, args: Tuple, kwargs: Dict[str, Any],
                        dts: List[TensorCore]) -> Tuple[Tuple, Dict[str, Any]]:
    """Python numbers in Tensor arguments (wrapped numbers, as ``x + 1``
    arrives) become 0-d constants. Their dtype follows the scalar promotion
    rule: a float is float64 next to floating tensors (which keep their own
    dtype) and the default dtype otherwise."""
    floating = any(t.dtype.is_floating_point or t.dtype.is_complex for t in dts)

    def conv(v: Any, type_str: str) -> Any:
        if type_str not in ("Tensor", "Optional[Tensor]"):
            return v
        if isinstance(v, bool):
            return torch.tensor(v, dtype=torch.bool)
        if isinstance(v, int):
            return torch.tensor(v, dtype=torch.int64)
        if isinstance(v, float):
            return torch.tensor(v, dtype=torch.float64 if floating else torch.get_default_dtype())
        if isinstance(v, complex):
            return torch.tensor(v, dtype=torch.complex128)
        return v

    arguments = schema.arguments
    new_args = tuple(
        conv(a, str(arguments[i].type)) if i < len(arguments) else a for i, a in enumerate(args)
    )
    by_name = {a.name: str(a.type) for a in arguments}
    new_kwargs = {k: conv(v, by_name.get(k, "")) for k, v in kwargs.items()}
    return new_args, new_kwargs


# Ops whose result is a Python value computed from metadata alone (shape,
# strides, dtype, layout): answered on the controller from the fake tensors,
# nothing is sent. autograd calls aten::is_same_size, for one.
_METADATA_OPS = {
    "aten::is_same_size",
    "aten::sym_size",
    "aten::sym_stride",
    "aten::sym_numel",
    "aten::sym_storage_offset",
    "aten::size",
    "aten::stride",
    "aten::dim",
    "aten::numel",
    "aten::storage_offset",
    "aten::is_contiguous",
    "aten::is_strides_like_format",
    "aten::is_non_overlapping_and_dense",
    "aten::is_floating_point",
    "aten::is_complex",
    "aten::is_signed",
    "aten::is_conj",
    "aten::is_neg",
    "aten::is_inference",
    "aten::result_type",
    "aten::output_nr",
}


def _answer_metadata(func: Any, args: Tuple, kwargs: Dict[str, Any]) -> Any:
    fake_args, fake_kwargs = tree_map(to_fake, (args, kwargs))
    with fake_mode:
        out = func(*fake_args, **fake_kwargs)
    if any(isinstance(o, torch.Tensor) for o in tree_flatten(out)[0]):
        raise RuntimeError(f"{func._schema.name} returned a tensor: not a metadata query")
    return out


def _undefined_result(mesh: Any, stream: Stream) -> TensorCore:
    """The result ref of a `Tensor` return the op left undefined: never
    handed to the program (it sees None), deleted once the op is sent."""
    with fake_mode:
        fake = torch.empty((0,))
    return new_dtensor(fake, mesh, stream)


def _name(func: Any) -> Tuple[str, str]:
    s = func._schema
    return s.name, s.overload_name


def dispatch(func: Any, args: Tuple, kwargs: Dict[str, Any], mesh: Any) -> Any:
    loc = user_location()
    name, overload = _name(func)
    what = f"{name}" + (f".{overload}" if overload else "")
    flat, _ = tree_flatten((args, kwargs))
    dts = [a for a in flat if isinstance(a, TensorCore)]
    if mesh is None:
        if not dts:
            return func(*args, **kwargs)
        mesh = dts[0]._mesh
    if name in _METADATA_OPS:
        return _answer_metadata(func, args, kwargs)
    stream = get_active_stream()
    schema = func._schema

    # Local tensors: 0-d ones are constants (Python numbers arrive as wrapped
    # 0-d tensors), anything else is a LOCAL_TENSOR misuse.
    consts: Dict[int, torch.Tensor] = {}
    for a in flat:
        if isinstance(a, torch.Tensor) and not isinstance(a, TensorCore):
            if name in _LIFT or a.dim() == 0:
                consts[id(a)] = a
            else:
                raise usage(
                    "LOCAL_TENSOR",
                    f"{what} mixes a local tensor (shape {tuple(a.shape)}) with the mesh "
                    f"{mesh._describe()}; create it inside mesh.activate() or move it there",
                )
    for t in dts:
        check_use(t, mesh, stream, what)
    written: List[TensorCore] = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            v = args[i] if i < len(args) else kwargs.get(arg.name)
            for x in tree_flatten(v)[0]:
                if isinstance(x, TensorCore):
                    written.append(x)
    for t in written:
        check_mutate(t, what)
    check_devices(what, name, dts)

    fake_args, fake_kwargs = tree_map(to_fake, (args, kwargs))
    if name == "aten::arange" and fake_kwargs.get("dtype") is None:
        # torch 1.13's meta arange infers int64 from float bounds; CPU does not.
        if any(isinstance(a, float) for a in fake_args):
            fake_kwargs["dtype"] = torch.get_default_dtype()
    try:
        if name in _LIFT:
            # torch.tensor(data) inside activate: the data is a constant.
            out = fake_mode.from_tensor(args[0])
        else:
            with fake_mode:
                out = func(*fake_args, **fake_kwargs)
    except Exception as e:  # shape errors and friends: raise at the call site
        text = str(e)
        if "found two different devices" in text:  # FakeTensor's wording of a mix
            seen = [device_of(t) for t in dts]
            raise device_mix(what, seen[0], next(
                (d for d in seen if d != seen[0]), seen[0])) from None
        if type(e) in (RuntimeError, ValueError, TypeError, IndexError):
            raise type(e)(str(e)) from None
        raise

    by_fake = {id(t._fake): t for t in written}
    results: List[TensorCore] = []
    from_input = next((d for d in map(intended_device, dts) if d is not None), None)
    if devices.device_override is not None:
        result_device: Optional[torch.device] = devices.device_override
    else:
        explicit = next((x for x in flat if isinstance(x, torch.device)), None)
        if explicit is not None and not (name in DEVICE_FROM_INPUT and explicit.type == "cpu"):
            result_device = explicit if explicit.type != "cpu" else None
        else:
            result_device = from_input

    def wrap(o: Any) -> Any:
        if isinstance(o, torch.Tensor):
            existing = by_fake.get(id(o))
            if existing is not None:
                results.append(existing)
                return existing
            if not isinstance(o, FakeTensor):
                o = fake_mode.from_tensor(o)
            d = new_dtensor(o, mesh, stream, result_device)
            results.append(d)
            return d
        if isinstance(o, (int, float, bool)) and not isinstance(out, (list, tuple)):
            raise RuntimeError(
                f"{what} returns a Python value computed from a distributed tensor; use "
                "monarch.inspect(t) to bring a value to the controller"
            )
        return o

    # Every `Tensor` return of the schema gets a result ref, also one the op
    # leaves undefined (None here, e.g. native_layer_norm_backward with a
    # false output_mask entry): the workers bind results in schema order and
    # give such a ref an error naming the op; the caller still sees None.
    returns = schema.returns

    def undefined(i: int) -> bool:
        return i < len(returns) and str(returns[i].type) == "Tensor"

    if out is None and len(returns) == 1 and undefined(0):
        results.append(_undefined_result(mesh, stream))
        wrapped = None
    elif isinstance(out, tuple) and any(o is None and undefined(i) for i, o in enumerate(out)):
        items = []
        for i, o in enumerate(out):
            if o is None and undefined(i):
                results.append(_undefined_result(mesh, stream))
                items.append(None)
            else:
                items.append(tree_map(wrap, o))
        wrapped = tuple(items)
    else:
        wrapped = tree_map(wrap, out)
    args, kwargs = _numbers_to_tensors(schema, args, kwargs, dts)
    real = devices.device_override
    if real is None and name in DEVICE_FROM_INPUT:
        real = from_input
    if real is not None:
        def redevice(x: Any) -> Any:
            if isinstance(x, torch.device) and x.type == "cpu":
                return real
            return x

        args, kwargs = tree_map(redevice, (args, kwargs))
    sink_for(mesh._session).op(func, args, kwargs, results, consts, mesh, stream, loc)
    return wrapped
