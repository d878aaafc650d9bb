"""The capture of torch calls at the ATen level (docs/python.md,
"Distributed tensors", "How capture is fast").

Under ``mesh.activate()`` a ``TorchDispatchMode`` (:class:`CaptureMode`)
receives every ATen call (factories included); ops on distributed tensors
outside ``activate`` reach :func:`dispatch` through the tensor class's
``__torch_dispatch__``. Autograd runs on the controller above the
dispatcher, so backward ops are captured the same way.

The first call of an op with a given *signature* -- the op, and for each
argument its metadata (shape, strides, dtype, device) or value -- runs it on
meta tensors (fake tensors where those cannot answer: "first calls on meta
tensors" below) for the results' metadata and makes an :class:`Entry`: the
results' specs, which outputs alias inputs, and the instruction as a
template for the session's C++ instruction stream. Every later call with the
same signature checks the rules of docs/python.md, makes its results from
the specs and issues one ``stream.op(template, ...)``: no fake tensor, no
pytree, no protobuf built in Python.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ..common.errors import usage
from ..common.location import user_location, user_frame
from . import core, devices, modes, streams, tracing
from .checks import check_mutate, check_use
from .core import (HAS_CUDA, Ref, Spec, TensorCore, _extent, device_of, fake_mode,
                   intended_device, make_tensor, new_dtensor)
from .devices import DEVICE_FROM_INPUT, check_devices, device_mix
from .streams import Stream, get_active_stream
from .tracing import sink_for
from .values import DTYPE_TO_PLAN, to_value


def _dispatch_in_handler(func: Any, args: Tuple, kwargs: Optional[Dict[str, Any]],
                         mesh: Any) -> Any:
    """dispatch() from the capture mode's handler (modes.handling(), inline)."""
    t = _thread
    t.in_handler += 1
    try:
        return dispatch(func, args, kwargs or {}, mesh)
    finally:
        t.in_handler -= 1


class CaptureMode(TorchDispatchMode):
    """Every ATen call inside ``activate`` runs on the active mesh: a cached
    call is ``_C.cached_dispatch`` (frontend/csrc/CachedDispatch.h), the
    others :func:`_dispatch_in_handler` (a hit never calls ``local()``, so it
    needs no handler bookkeeping). On torch 1.x (the capture mode in the C++
    slot, modes.py) the whole handler is ``_C.capture_dispatch``, installed
    below: no Python frame per op."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return python_handler(self, func, types, args, kwargs)


def python_handler(mode: Any, func: Any, types: Any, args: Tuple = (),
                   kwargs: Optional[Dict[str, Any]] = None) -> Any:
    """CaptureMode's handler as Python (torch 2.x; tests run it on 1.x)."""
    mesh = _mesh_stack[-1] if _mesh_stack else None
    r = _cached_dispatch(func, args, kwargs, mesh)
    if r is _MISS:
        r = _dispatch_in_handler(func, args, kwargs, mesh)
    return r


_thread = modes._thread
_mesh_stack = modes._mesh_stack
_default_dtype = torch.get_default_dtype
_C = core._C
if _C is not None:
    _cached_dispatch = _C.cached_dispatch
    _MISS = _C.MISS
else:  # no session runs without _C: every call is the Python path's
    _MISS = object()

    def _cached_dispatch(func: Any, args: Tuple, kwargs: Any, mesh: Any) -> Any:
        return _MISS


@contextlib.contextmanager
def activate(mesh: Any) -> Iterator[Any]:
    """Run torch calls inside on every rank of ``mesh``."""
    modes.push_mesh(mesh)
    entered = False
    d_direct = False
    if modes.capture is None:
        if not HAS_CUDA:
            devices.install_cuda_on_cpu(modes.any_active)
        modes.capture = CaptureMode()
        d_direct = modes.enter_dispatch(modes.capture)
        entered = True
    try:
        yield mesh
    finally:
        modes.pop_mesh()
        if entered:
            mode, modes.capture = modes.capture, None
            modes.exit_dispatch(mode, d_direct)


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


# -- first calls on meta tensors ----------------------------------------------------------
#
# A first call needs the results' shapes, strides and dtypes (and which
# results are inputs). FakeTensorMode answers with the op's meta kernel plus
# Python around it -- a mode push, pytree walks, argument normalization,
# FakeTensor wrappers of every input -- and the fake tensors themselves cost
# a FakeTensorMode dispatch each to make. Most ops need only the meta kernel:
# _propagate_meta runs it on plain meta tensors made from the inputs' specs
# and applies FakeTensor's device rule itself (torch 1.13's
# fake_tensor.py: the inputs' common device, CPU 0-d tensors deferring to
# the others; a factory's device argument, CPU by default; ``*_like`` the
# input's). Whatever it cannot answer the same way -- no meta kernel, an
# error (a shape error's message is FakeTensor's), inputs on two devices,
# results that are not meta tensors, the ops FakeTensor treats specially --
# goes the FakeTensor way, as before.

_META_PLAIN, _META_CONSTRUCTOR, _META_TO_COPY = 1, 2, 3
_META = torch.device("meta")
_CPU = torch.device("cpu")
#: Ops FakeTensorMode implements itself (data-dependent output, special
#: device rules) and ones whose meta kernels differ: always FakeTensor.
_FAKE_ONLY = {
    "aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_",
    "aten::resize_", "aten::resize_as_",
    "aten::to", "aten::_sparse_coo_tensor_with_dims_and_tensors", "aten::_list_to_tensor",
    "aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique", "aten::_unique2",
    "aten::unique_dim", "aten::unique_consecutive", "aten::repeat_interleave",
    "aten::_local_scalar_dense", "aten::item", "aten::equal", "aten::allclose",
    "aten::set_", "aten::lift", "aten::lift_fresh", "aten::lift_fresh_copy",
}
#: Set False to send every first call through FakeTensorMode (tests).
META_PROPAGATION = True
#: Ops whose meta run failed where FakeTensorMode answered (no meta kernel):
#: their first calls go the FakeTensor way at once.
learned_fake: set = set()
#: MONARCH_CHECK_META=1: every meta run is checked against FakeTensorMode
#: (results' metadata, devices, which results are inputs); a difference
#: raises AssertionError. For tests of the fast path, slow.
CHECK_META = os.environ.get("MONARCH_CHECK_META", "") not in ("", "0")


def _has_tensor_type(t: Any) -> bool:
    tensor = torch._C.TensorType.get()
    return t.isSubtypeOf(tensor) or any(_has_tensor_type(e) for e in t.containedTypes())


def _meta_kind(info: "OpInfo", schema: Any, func: Any) -> Optional[int]:
    if info.name in _FAKE_ONLY or info.lift or info.metadata or info.controller_only:
        return None
    tags = getattr(func, "tags", ())
    for tag in ("dynamic_output_shape", "data_dependent_output", "inplace_view"):
        t = getattr(torch.Tag, tag, None)
        if t is not None and t in tags:
            return None
    if info.name == "aten::_to_copy":
        return _META_TO_COPY
    if info.device_from_input:
        return _META_CONSTRUCTOR
    has_device = any("Device" in t for t in info.arg_types)
    if not any(_has_tensor_type(a.type) for a in schema.arguments):
        if len(schema.returns) == 1 and schema.returns[0].type is torch._C.TensorType.get():
            return _META_CONSTRUCTOR
        return None
    if has_device:  # a device argument of an op FakeTensor has no rule for
        return None
    return _META_PLAIN


def _indexed(d: torch.device) -> torch.device:
    """FakeTensor's rule for a device asked for without an index: ``cuda``
    is the current CUDA device. Autograd's engine needs the index (a
    backward through a ``cuda`` result without one fails its assertion)."""
    if d.index is None and d.type == "cuda" and HAS_CUDA:
        return torch.device("cuda", torch.cuda.current_device())
    return d


class _NeedFake(Exception):
    """The meta run cannot give FakeTensor's answer: run FakeTensorMode."""


def _meta_of(spec: Spec) -> torch.Tensor:
    if spec.offset:
        return torch.empty(spec.offset + _extent(spec.shape, spec.stride), dtype=spec.dtype,
                           device=_META).as_strided(spec.shape, spec.stride, spec.offset)
    return torch.empty_strided(spec.shape, spec.stride, dtype=spec.dtype, device=_META)


class _MetaArgs:
    """The meta arguments of one call and the inputs' common device."""

    __slots__ = ("metas", "device", "cpu_zero_dim", "first")

    def __init__(self) -> None:
        self.metas: Dict[int, torch.Tensor] = {}  # id(distributed tensor) -> its meta
        self.device: Optional[torch.device] = None
        self.cpu_zero_dim = False
        self.first: Optional[torch.device] = None  # the first tensor argument's device

    def merge(self, d: torch.device, zero_dim: bool) -> None:
        """FakeTensor._find_common_device, one tensor at a time."""
        if self.first is None:
            self.first = d
        czd = zero_dim and d.type == "cpu"
        if self.device is None:
            self.device, self.cpu_zero_dim = d, czd
        elif d == self.device:
            if self.cpu_zero_dim:
                self.cpu_zero_dim = czd
        elif czd:
            pass
        elif self.cpu_zero_dim:
            self.device, self.cpu_zero_dim = d, czd
        else:  # two devices: FakeTensor's error (or its rules for such ops)
            raise _NeedFake()

    def conv(self, x: Any) -> Any:
        if isinstance(x, TensorCore):
            m = self.metas.get(id(x))
            if m is None:
                sp = x._spec
                m = self.metas[id(x)] = _meta_of(sp)
                self.merge(sp.fake_device, len(sp.shape) == 0)
            return m
        t = type(x)
        if t is list or t is tuple:
            return t([self.conv(y) for y in x])
        if isinstance(x, torch.Tensor):  # a local constant (0-d)
            if x.layout != torch.strided or x.requires_grad or isinstance(x, FakeTensor):
                raise _NeedFake()
            self.merge(x.device, x.dim() == 0)
            return torch.empty_strided(tuple(x.shape), x.stride(), dtype=x.dtype,
                                       device=_META)
        return x


def _propagate_meta(func: Any, info: OpInfo, args: Tuple, kwargs: Dict[str, Any],
                    dts: List[TensorCore]) -> Tuple[Any, torch.device, Dict[int, int]]:
    """The op run on meta tensors: its output tree (meta tensors), the device
    FakeTensor would give its new results, and id(meta input) -> index in
    ``dts`` (results that are inputs). Raises _NeedFake."""
    ma = _MetaArgs()
    margs = [ma.conv(a) for a in args]
    mkwargs = {k: ma.conv(v) for k, v in kwargs.items()} if kwargs else {}
    kind = info.meta
    if kind == _META_PLAIN:
        if ma.device is None:
            raise _NeedFake()
        out_device = ma.device
    else:
        pos, kwarg_only = info.device_arg if info.device_arg is not None else (-1, True)
        if pos >= 0 and not kwarg_only and pos < len(margs):
            asked, margs[pos] = margs[pos], _META
        elif kind == _META_TO_COPY:
            asked = mkwargs.pop("device", None)
        else:
            asked = mkwargs.get("device")
            if pos >= 0:
                mkwargs["device"] = _META
            elif kind == _META_CONSTRUCTOR and not info.device_from_input:
                raise _NeedFake()  # a factory without a device argument
        if asked is not None and not isinstance(asked, torch.device):
            raise _NeedFake()
        if kind == _META_CONSTRUCTOR and not info.device_from_input:
            default = _CPU
        else:  # *_like, _to_copy: the input's device
            if ma.first is None:
                raise _NeedFake()
            default = ma.first
        out_device = _indexed(asked) if asked is not None else default
    guard = torch._C._DisableTorchDispatch()  # no mode sees the meta run
    try:
        out = func(*margs, **mkwargs)
    except Exception:
        raise _NeedFake() from None
    finally:
        del guard
    _check_meta_out(out)
    # The instruction names distributed tensors in signature order (dts):
    # map each meta input to its position there.
    metas = ma.metas
    if len(metas) != len({id(t) for t in dts}):  # a walk that missed a tensor: a bug
        raise AssertionError(f"{info.what}: {len(metas)} meta inputs for {len(dts)} tensors")
    return out, out_device, {id(metas[id(t)]): k for k, t in enumerate(dts)}


def _check_meta_out(o: Any) -> None:
    """Every tensor of the output is a plain meta tensor."""
    if isinstance(o, torch.Tensor):
        if type(o) is not torch.Tensor or not o.is_meta:
            raise _NeedFake()
    elif isinstance(o, (tuple, list)):
        for x in o:
            _check_meta_out(x)


class OpInfo:
    """What dispatch needs of an op's schema, computed once per op."""

    __slots__ = ("name", "overload", "what", "arg_types", "arg_names", "written",
                 "metadata", "lift", "device_from_input", "returns_tensor", "controller_only",
                 "meta", "device_arg", "fast")

    def __init__(self, func: Any):
        schema = func._schema
        self.name = schema.name
        self.overload = schema.overload_name
        self.what = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        self.arg_types = [str(a.type) for a in schema.arguments]
        self.arg_names = {a.name: i for i, a in enumerate(schema.arguments)}
        #: (position, name) of every argument the op writes.
        self.written = [(i, a.name) for i, a in enumerate(schema.arguments)
                        if a.alias_info is not None and a.alias_info.is_write]
        self.metadata = self.name in _METADATA_OPS
        self.lift = self.name in _LIFT
        self.device_from_input = self.name in DEVICE_FROM_INPUT
        self.returns_tensor = [str(r.type) == "Tensor" for r in schema.returns]
        #: The profiler's record_function markers (torch.optim wraps every
        #: step in one): bookkeeping of the controller, never a mesh op.
        self.controller_only = self.name.startswith("profiler::")
        #: How a first call propagates metadata: _META_PLAIN (the meta
        #: kernel, results on the inputs' device), _META_CONSTRUCTOR (a
        #: factory or ``*_like``: the meta kernel, results on the device
        #: asked for), _META_TO_COPY, or None (FakeTensor: see _meta_kind).
        self.meta = _meta_kind(self, schema, func)
        #: (position, kwarg-only) of the ``device`` argument, or None.
        self.device_arg = next(((i, a.kwarg_only) for i, a in enumerate(schema.arguments)
                                if a.name == "device"), None)
        #: Whether a cached call may take _C.cached_dispatch (none of the
        #: cases dispatch() handles before its cache: CachedDispatch.h).
        self.fast = not (self.controller_only or self.metadata or self.lift or
                         (self.device_arg is not None and not HAS_CUDA))


def op_info(func: Any) -> OpInfo:
    """The op's OpInfo, kept on the OpOverload itself (hashing one runs
    Python code)."""
    info = func.__dict__.get("_monarch_info")
    if info is None:
        info = func.__dict__["_monarch_info"] = OpInfo(func)
    return info


class _Uncacheable(Exception):
    """An argument the signature cannot describe: the op takes the slow path."""


_SIMPLE = (str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


def _tensor_key(a: torch.Tensor) -> Any:
    """The key of a local tensor argument: a 0-d constant is keyed by its
    value; any other (None) makes the call uncacheable."""
    if a.dim() == 0 and not isinstance(a, FakeTensor):
        return ("const", a.dtype, a.device.type, a.item())
    return None


def signature(args: Tuple, kwargs: Dict[str, Any], dts: List[TensorCore]) -> Any:
    """The cache key of a call (``_C.signature``, frontend/csrc/CachedDispatch.cpp,
    the one rule for it: each distributed tensor by its interned spec, numbers
    with their type, dtypes, devices, strings and None as themselves,
    sequences item by item, a 0-d local tensor by its value); collects the
    call's distributed tensors into ``dts`` in the order the instruction
    names them. Raises _Uncacheable for an argument it cannot describe."""
    out = _C.signature(args, kwargs)
    if out is None:
        raise _Uncacheable()
    key, found = out
    dts.extend(found)
    return key


# Kinds of an entry's outputs (in the order the instruction binds results).
_NEW, _ALIAS, _UNDEFINED = 0, 1, 2


class Entry:
    """A cached op: see the module docstring."""

    __slots__ = ("call_op", "specs", "outputs", "structure", "result_types",
                 "metadata_value", "fast")

    def __init__(self) -> None:
        self.call_op = b""
        self.specs: List[Spec] = []
        #: (kind, index): a new result (index into specs), an input (index
        #: into the call's distributed tensors), or an undefined result.
        self.outputs: List[Tuple[int, int]] = []
        #: How the Python result is put together from the outputs.
        self.structure: Any = None
        #: (dtype code, shape) of each output, for recording.
        self.result_types: List[Tuple[int, List[int]]] = []
        self.metadata_value: Any = None
        #: _C.cached_dispatch's compiled form (made on its first hit), or
        #: False when its results are not a hit's to make.
        self.fast: Any = None


_cache: Dict[Any, Entry] = {}
#: Bound on the entries kept (signatures seen); the cache starts afresh past it.
CACHE_LIMIT = 65536


if _C is not None:
    from ..common import location as _location

    _C.configure_cached_dispatch({
        "cache": _cache, "tensor_core": TensorCore, "core_globals": vars(core),
        "make_wrapper": torch.Tensor._make_wrapper_subclass,
        "default_dtype": torch.get_default_dtype, "devices_globals": vars(devices),
        "tracing_globals": vars(tracing), "streams_globals": vars(streams),
        "location_globals": vars(_location), "simple_types": _SIMPLE,
        "size_type": torch.Size, "tensor_type": torch.Tensor, "tensor_key": _tensor_key,
        "modes_globals": vars(modes), "fallback": _dispatch_in_handler,
    })
    if modes.LEGACY_MODE_STACKS:
        CaptureMode.__torch_dispatch__ = staticmethod(_C.capture_dispatch)  # type: ignore


def cache_info() -> Dict[str, int]:
    """How many op signatures are cached (tests, diagnostics)."""
    return {"entries": len(_cache)}


def _build(o: Any, entry: Entry, by_fake: Dict[int, int], undefined_ok: List[bool],
           top: bool) -> Any:
    """The structure of an output tree, filling ``entry.outputs``/``specs``;
    raises _Uncacheable for outputs it cannot describe."""
    if isinstance(o, torch.Tensor):
        k = by_fake.get(id(o))
        if k is not None:
            entry.outputs.append((_ALIAS, k))
        else:
            entry.outputs.append((_NEW, len(entry.specs)))
            entry.specs.append(None)  # type: ignore[arg-type]  # filled by the caller
        return ("out", len(entry.outputs) - 1)
    if o is None and undefined_ok and undefined_ok[0]:
        entry.outputs.append((_UNDEFINED, -1))
        return ("undefined", len(entry.outputs) - 1)
    if top and isinstance(o, (tuple, list)):
        items = []
        for i, x in enumerate(o):
            ok = [i < len(undefined_ok) and undefined_ok[i]] if undefined_ok else []
            if isinstance(x, (tuple, list)):
                items.append((type(x), [_build(y, entry, by_fake, [], False) for y in x]))
            else:
                items.append(_build(x, entry, by_fake, ok, False))
        return (type(o), items)
    if isinstance(o, (tuple, list)):
        return (type(o), [_build(y, entry, by_fake, [], False) for y in o])
    if o is None or isinstance(o, (bool, int, float, torch.dtype)):
        return ("value", o)
    raise _Uncacheable()


def _assemble(structure: Any, objs: List[Any]) -> Any:
    kind = structure[0]
    if kind == "out":
        return objs[structure[1]]
    if kind == "undefined":
        return None
    if kind == "value":
        return structure[1]
    return kind([_assemble(s, objs) for s in structure[1]])


def dispatch(func: Any, args: Tuple, kwargs: Dict[str, Any], mesh: Any) -> Any:
    info = func.__dict__.get("_monarch_info")
    if info is None:
        info = op_info(func)
    if info.controller_only:
        with modes.local():
            return func(*args, **kwargs)
    if info.device_arg is not None and not HAS_CUDA and devices.device_override is None:
        asked = devices.cuda_asked(info.device_arg, args, kwargs)
        if asked is not None:  # run with the CPU, remember the device asked for
            args, kwargs = devices.on_cpu(info.device_arg, args, kwargs)
            devices.device_override = asked
            try:
                return dispatch(func, args, kwargs, mesh)
            finally:
                devices.device_override = None
    dts: List[TensorCore] = []
    try:
        sig: Any = signature(args, kwargs, dts)
    except _Uncacheable:
        sig = None
        dts = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, TensorCore)]
    if mesh is None:
        if not dts:
            return func(*args, **kwargs)
        mesh = dts[0]._mesh
    session = mesh._session
    if tracing._current is not None and session.recording is None:
        tracing.check_recorded(session)
    if info.lift or sig is None:
        return _dispatch_slow(func, info, args, kwargs, mesh)
    key = (info, sig, _default_dtype(), devices.device_override)
    entry = _cache.get(key)
    if info.metadata:
        if entry is None:
            entry = Entry()
            entry.metadata_value = _answer_metadata(func, args, kwargs)
            _remember(key, entry)
        value = entry.metadata_value
        return list(value) if isinstance(value, list) else value
    stream = streams._active  # get_active_stream(), inline
    what = info.what
    for t in dts:
        # The common case inline: no borrow, same mesh object, same stream.
        ref = t._ref
        if ref.lending is not None or t._mesh is not mesh or ref.stream is not stream:
            check_use(t, mesh, stream, what)
    if info.written:
        for t in _written(info, args, kwargs):
            check_mutate(t, what)
    if session.dead is not None:  # a stopped mesh, a dead worker: nothing runs
        raise session.dead
    if entry is None:
        check_devices(what, info.name, dts)  # a function of the specs: once
        entry = _first_call(func, info, args, kwargs, dts, mesh)
        if entry is None:  # an output the cache cannot describe
            return _dispatch_slow(func, info, args, kwargs, mesh, checked=True)
        _remember(key, entry)
    mesh_id = mesh.__dict__.get("_tensor_mesh_id")  # session.mesh_id_of, inline
    if mesh_id is None:
        mesh_id = session.mesh_id_of(mesh)
    stream_id = session.stream_ids.get(stream.ir_name)
    if stream_id is None:
        stream_id = session.stream_id(stream.ir_name)
    # Results from the specs; inputs that are outputs (in-place, out=) stay.
    objs: List[Any] = []
    refs: List[int] = []
    specs = entry.specs
    cls = core._tensor_class
    for kind, index in entry.outputs:
        if kind == _NEW:
            ref = Ref.fresh(session, mesh, stream, mesh_id, stream_id)
            objs.append(make_tensor(cls, specs[index], mesh, ref))
            refs.append(ref.id)
        elif kind == _ALIAS:
            t = dts[index]
            objs.append(t)
            refs.append(t._ref.id)
        else:  # undefined: a ref the workers bind and the program never sees
            ref = Ref.fresh(session, mesh, stream, mesh_id, stream_id)
            objs.append(None)
            refs.append(ref.id)  # deleted when `ref` goes, after the op
    out_stream = session.stream
    if out_stream is not None:
        template = session.templates.get(entry)
        if template is None:
            recording = session.recording is not None
            template = session.templates[entry] = out_stream.define_op(
                entry.call_op, entry.result_types if recording else [])
            if recording:
                session.note_schema(func)
        code, line = user_frame()
        loc = session.locations.get((code, line))
        if loc is None:
            loc = session.location_id(code, line)
        try:
            out_stream.op(template, mesh_id, stream_id, loc,
                          tuple([t._ref.id for t in dts]), tuple(refs))
        except RuntimeError as e:
            raise session.unreachable(e) from None
    structure = entry.structure
    if structure[0] == "out":  # one result
        return objs[structure[1]]
    return _assemble(structure, objs)


def _remember(key: Any, entry: Entry) -> None:
    if len(_cache) >= CACHE_LIMIT:
        _cache.clear()
    _cache[key] = entry


def _written(info: OpInfo, args: Tuple, kwargs: Dict[str, Any]) -> List[TensorCore]:
    out: List[TensorCore] = []
    for i, name in info.written:
        v = args[i] if i < len(args) else kwargs.get(name)
        if isinstance(v, TensorCore):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, TensorCore))
    return out


def _fixed_kwargs(info: OpInfo, args: Tuple, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The keyword arguments the op is propagated with."""
    if info.name == "aten::arange" and kwargs.get("dtype") is None:
        # torch 1.13's meta arange infers int64 from float bounds; CPU does not.
        if any(isinstance(a, float) for a in args):
            return {**kwargs, "dtype": torch.get_default_dtype()}
    return kwargs


class _QuietMetaErrors(logging.Filter):
    """FakeTensorMode (torch 2.x) logs a traceback of every failed meta
    kernel before it raises; a first call re-raises that error at the
    user's call site, as eager torch would, so the log is noise there."""

    depth = 0

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.depth and str(record.msg).startswith("failed while attempting"))


_quiet_meta_errors = _QuietMetaErrors()
logging.getLogger("torch._subclasses.fake_tensor").addFilter(_quiet_meta_errors)


def _run_fake(func: Any, info: OpInfo, args: Tuple, kwargs: Dict[str, Any],
              dts: List[TensorCore]) -> Any:
    """The op run on fake tensors: its output tree."""
    fake_args, fake_kwargs = tree_map(to_fake, (args, kwargs))
    fake_kwargs = _fixed_kwargs(info, fake_args, fake_kwargs)
    _quiet_meta_errors.depth += 1
    try:
        if info.lift:
            # torch.tensor(data) inside activate: the data is a constant.
            return fake_mode.from_tensor(args[0])
        with fake_mode:
            return func(*fake_args, **fake_kwargs)
    except Exception as e:  # shape errors and friends: raise at the call site
        text = str(e)
        if "found two different devices" in text:  # FakeTensor's wording of a mix
            seen = [device_of(t) for t in dts]
            raise device_mix(info.what, seen[0], next(
                (d for d in seen if d != seen[0]), seen[0])) from None
        if type(e) in (RuntimeError, ValueError, TypeError, IndexError):
            raise type(e)(text) from None
        raise
    finally:
        _quiet_meta_errors.depth -= 1


def _result_device(info: OpInfo, args: Tuple, kwargs: Dict[str, Any],
                   dts: List[TensorCore]) -> Optional[torch.device]:
    """The device the op's new results have on the workers when it differs
    from their fakes' (None: the same)."""
    if devices.device_override is not None:
        return devices.device_override
    explicit = _explicit_device(args)
    if explicit is None and kwargs:
        explicit = _explicit_device(kwargs.values())
    if explicit is not None and not (info.device_from_input and explicit.type == "cpu"):
        return explicit if explicit.type != "cpu" else None
    return next((d for d in map(intended_device, dts) if d is not None), None)


def _explicit_device(values: Any) -> Optional[torch.device]:
    """The first torch.device among ``values`` (lists and tuples searched),
    as tree_flatten would find it."""
    for x in values:
        if isinstance(x, torch.device):
            return x
        if type(x) is list or type(x) is tuple:
            d = _explicit_device(x)
            if d is not None:
                return d
    return None


def _propagate(func: Any, info: OpInfo, args: Tuple, kwargs: Dict[str, Any],
               dts: List[TensorCore]) -> Tuple[Any, Optional[torch.device]]:
    """Runs the op on fake tensors: its output tree and the device its new
    results have on the workers (when it differs from the fakes')."""
    out = _run_fake(func, info, args, kwargs, dts)
    return out, _result_device(info, args, kwargs, dts)


def _sent_args(info: OpInfo, schema: Any, args: Tuple, kwargs: Dict[str, Any],
               dts: List[TensorCore]) -> Tuple[Tuple, Dict[str, Any]]:
    """The arguments as the workers receive them: Python numbers in Tensor
    arguments as 0-d constants, the device asked for where torch filled in
    the fakes' (a controller without a GPU)."""
    args, kwargs = _numbers_to_tensors(schema, args, kwargs, dts)
    real = devices.device_override
    if real is None and info.device_from_input:
        real = next((d for d in map(intended_device, dts) if d is not None), None)
    if real is not None:
        def redevice(x: Any) -> Any:
            if isinstance(x, torch.device) and x.type == "cpu":
                return real
            return x

        args, kwargs = tree_map(redevice, (args, kwargs))
    return args, kwargs


def _check_out(info: OpInfo, out: Any) -> None:
    if isinstance(out, (int, float, bool)):
        raise RuntimeError(
            f"{info.what} returns a Python value computed from a distributed tensor; use "
            "monarch.inspect(t) to bring a value to the controller"
        )


def _first_call(func: Any, info: OpInfo, args: Tuple, kwargs: Dict[str, Any],
                dts: List[TensorCore], mesh: Any) -> Optional[Entry]:
    """The entry of a signature not seen before (None: not cacheable)."""
    fake_device: Optional[torch.device] = None  # of new results: meta runs only
    if info.meta is not None and META_PROPAGATION and info not in learned_fake:
        try:
            out, fake_device, by_input = _propagate_meta(
                func, info, args, _fixed_kwargs(info, args, kwargs), dts)
        except _NeedFake:
            fake_device = None
        if CHECK_META and fake_device is not None:
            _check_against_fake(func, info, args, kwargs, dts, out, fake_device, by_input)
    if fake_device is None:
        out = _run_fake(func, info, args, kwargs, dts)
        by_input = {id(t._fake): k for k, t in enumerate(dts)}
        if info.meta is not None and META_PROPAGATION:
            # FakeTensor answered where the meta run could not (no meta
            # kernel, most often): this op takes the FakeTensor way from now on.
            learned_fake.add(info)
    result_device = _result_device(info, args, kwargs, dts)
    _check_out(info, out)
    entry = Entry()
    try:
        undefined_ok = list(info.returns_tensor)
        if out is None and len(undefined_ok) == 1 and undefined_ok[0]:
            entry.outputs.append((_UNDEFINED, -1))
            entry.structure = ("undefined", 0)
        else:
            entry.structure = _build(out, entry, by_input, undefined_ok, True)
    except _Uncacheable:
        return None
    if entry.specs:
        tensors = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        new = iter(f for f in tensors if id(f) not in by_input)
        for kind, index in entry.outputs:
            if kind == _NEW:
                f = next(new)
                if fake_device is not None:  # a meta tensor
                    entry.specs[index] = Spec.get(tuple(f.shape), tuple(f.stride()),
                                                  f.storage_offset(), f.dtype, fake_device,
                                                  result_device)
                    continue
                if not isinstance(f, FakeTensor):
                    f = fake_mode.from_tensor(f)
                entry.specs[index] = Spec.of(f, result_device)
    for kind, index in entry.outputs:
        if kind == _NEW:
            sp = entry.specs[index]
            entry.result_types.append((int(DTYPE_TO_PLAN[sp.dtype]), list(sp.shape)))
        elif kind == _ALIAS:
            t = dts[index]
            entry.result_types.append((int(DTYPE_TO_PLAN[t.dtype]), list(t.shape)))
        else:
            entry.result_types.append((int(DTYPE_TO_PLAN[torch.float32]), [0]))
    entry.call_op = _template(func, info, args, kwargs, dts, len(entry.outputs))
    return entry


def _described(out: Any, device: Optional[torch.device], by_input: Dict[int, int]) -> Any:
    """An output tree as metadata (CHECK_META)."""
    if isinstance(out, torch.Tensor):
        k = by_input.get(id(out))
        if k is not None:
            return ("input", k)
        return (tuple(out.shape), tuple(out.stride()), out.storage_offset(), out.dtype,
                device if device is not None else out.device)
    if isinstance(out, (tuple, list)):
        return (type(out), [_described(o, device, by_input) for o in out])
    return out


def _check_against_fake(func: Any, info: OpInfo, args: Tuple, kwargs: Dict[str, Any],
                        dts: List[TensorCore], out: Any, fake_device: torch.device,
                        by_input: Dict[int, int]) -> None:
    fake_out = _run_fake(func, info, args, kwargs, dts)
    by_fake = {id(t._fake): k for k, t in enumerate(dts)}
    got = _described(out, fake_device, by_input)
    want = _described(fake_out, None, by_fake)
    if got != want:
        raise AssertionError(f"{info.what}: the meta run gives {got}, FakeTensor {want}")


def _template(func: Any, info: OpInfo, args: Tuple, kwargs: Dict[str, Any],
              dts: List[TensorCore], n_results: int) -> bytes:
    """The CallOp with placeholders: -(k+1) for the k-th distributed tensor
    argument, -(j+1) for result j (frontend/csrc/InstructionStream.h)."""
    from ..backend.plan import plan

    sent_args, sent_kwargs = _sent_args(info, func._schema, args, kwargs, dts)
    counter = [0]

    def placeholder(t: Any) -> int:
        counter[0] += 1
        return -counter[0]

    call = plan.CallOp(name=info.name, overload=info.overload)
    types = info.arg_types
    for i, a in enumerate(sent_args):
        call.args.append(to_value(a, types[i] if i < len(types) else "", placeholder))
    for k, v in sent_kwargs.items():
        nv = call.kwargs.add(name=k)
        i = info.arg_names.get(k)
        nv.value.CopyFrom(to_value(v, types[i] if i is not None else "", placeholder))
    if counter[0] != len(dts):  # the walk and the signature disagree: a bug
        raise AssertionError(f"{info.what}: {counter[0]} placeholders for {len(dts)} inputs")
    call.results.extend(-(j + 1) for j in range(n_results))
    return call.SerializeToString()


def _dispatch_slow(func: Any, info: OpInfo, args: Tuple, kwargs: Dict[str, Any], mesh: Any,
                   checked: bool = False) -> Any:
    """Ops the cache cannot describe (lifted constants, odd arguments or
    outputs) and every op while tracing: fake tensors each call."""
    loc = user_location()
    what = info.what
    flat, _ = tree_flatten((args, kwargs))
    dts = [a for a in flat if isinstance(a, TensorCore)]
    if info.metadata:
        return _answer_metadata(func, args, kwargs)
    stream = get_active_stream()
    schema = func._schema

    # Local tensors: 0-d ones are constants (Python numbers arrive as wrapped
    # 0-d tensors), anything else is a LOCAL_TENSOR misuse.
    consts: Dict[int, torch.Tensor] = {}
    for a in flat:
        if isinstance(a, torch.Tensor) and not isinstance(a, TensorCore):
            if info.lift or a.dim() == 0:
                consts[id(a)] = a
            else:
                raise usage(
                    "LOCAL_TENSOR",
                    f"{what} mixes a local tensor (shape {tuple(a.shape)}) with the mesh "
                    f"{mesh._describe()}; create it inside mesh.activate() or move it there",
                )
    if not checked:
        for t in dts:
            check_use(t, mesh, stream, what)
        for t in _written(info, args, kwargs):
            check_mutate(t, what)
        check_devices(what, info.name, dts)

    out, result_device = _propagate(func, info, args, kwargs, dts)
    written = _written(info, args, kwargs)
    by_fake = {id(t._fake): t for t in written}
    results: List[TensorCore] = []

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
            _check_out(info, o)
        return o

    # Every `Tensor` return of the schema gets a result ref, also one the op
    # leaves undefined (None here, e.g. native_layer_norm_backward with a
    # false output_mask entry): the workers bind results in schema order and
    # give such a ref an error naming the op; the caller still sees None.
    returns = info.returns_tensor

    def undefined(i: int) -> bool:
        return i < len(returns) and returns[i]

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
    args, kwargs = _sent_args(info, schema, args, kwargs, dts)
    sink_for(mesh._session).op(func, args, kwargs, results, consts, mesh, stream, loc)
    return wrapped
