"""Distributed tensors and the capture of torch calls at the ATen level.

A :class:`DTensor` is a torch wrapper subclass: it has the shape, dtype and
autograd state of one rank's local tensor (tracked with a fake tensor) and a
ref naming the per-rank tensors on the workers. Under ``mesh.activate()`` a
``TorchDispatchMode`` receives every ATen call (factories included), runs it
on fake tensors for the result metadata and issues it to the mesh; ops on
distributed tensors outside ``activate`` run on the mesh of their operands.
Autograd runs on the controller above the dispatcher, so backward ops are
captured the same way.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from . import _stream
from ._errors import usage
from ._location import user_location
from ._stream import Borrow, Stream

_fake_mode = FakeTensorMode()
_CUDA = torch.cuda.is_available()

REDUCTIONS = ("sum", "avg", "min", "max", "product", "stack")


# -- refs ------------------------------------------------------------------------


class _Ref:
    """A ref on the workers; deleted there when the last handle goes away."""

    __slots__ = (
        "session",
        "id",
        "mesh",
        "stream",
        "owns",
        "borrow",
        "mut_borrow",
        "ro_borrows",
        "__weakref__",
    )

    def __init__(self, session: Any, mesh: Any, stream: Stream, owns: bool = True):
        self.session = session
        self.id = session.new_ref()
        self.mesh = mesh
        self.stream = stream
        self.owns = owns
        self.borrow: Optional[Borrow] = None  # the borrow that made this ref
        self.mut_borrow: Optional[Borrow] = None  # a live mutable borrow of it
        self.ro_borrows: List[Borrow] = []  # live read-only borrows of it

    def __del__(self) -> None:
        try:
            if self.owns and self.session.has_workers:
                self.session.queue_delete(
                    self.id,
                    self.session.mesh_ids.get(self.mesh._view, 0),
                    self.session.stream_ids.get(self.stream.ir_name, 0),
                )
        except Exception:
            pass


# -- the tensor --------------------------------------------------------------------


class DTensor(torch.Tensor):
    """A tensor distributed over a proc mesh: one local tensor per rank."""

    _fake: torch.Tensor
    _ref: _Ref
    _mesh: Any

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, fake: torch.Tensor, mesh: Any, ref: _Ref) -> "DTensor":
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            fake.size(),
            strides=fake.stride(),
            storage_offset=fake.storage_offset(),
            dtype=fake.dtype,
            layout=fake.layout,
            device=fake.device,
            requires_grad=False,
        )
        r._fake = fake
        r._ref = ref
        r._mesh = mesh
        return r

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[override]
        return dispatch(func, args, kwargs or {}, None)

    # ``.data``: an alias without autograd history; assigning it (as
    # ``Module.to/cuda/double`` do) makes this tensor name the new value.
    @property
    def data(self) -> "DTensor":  # type: ignore[override]
        with _local():
            return dispatch(torch.ops.aten.detach.default, (self,), {}, None)

    @data.setter
    def data(self, new: Any) -> None:
        if not isinstance(new, DTensor):
            raise usage(
                "LOCAL_TENSOR",
                "assigning a local tensor to .data of a distributed tensor; create it on "
                "the mesh",
            )
        torch.Tensor.data.__set__(self, new)  # type: ignore[attr-defined]
        self._fake = new._fake
        self._ref = new._ref
        self._mesh = new._mesh
        self._device = getattr(new, "_device", None)

    # -- monarch API -----------------------------------------------------------
    @property
    def mesh(self) -> Any:
        return self._mesh

    @property
    def stream(self) -> Stream:
        return self._ref.stream

    def reduce(
        self,
        dims: Union[str, Sequence[str]] = (),
        reduction: str = "sum",
        scatter: bool = False,
        mesh: Any = None,
        out: Optional["DTensor"] = None,
    ) -> "DTensor":
        return reduce_tensor(self, dims, reduction, scatter, False, out, user_location())

    def reduce_(
        self,
        dims: Union[str, Sequence[str]] = (),
        reduction: str = "sum",
        scatter: bool = False,
        mesh: Any = None,
    ) -> "DTensor":
        return reduce_tensor(self, dims, reduction, scatter, True, None, user_location())

    def to_mesh(self, mesh: Any) -> "DTensor":
        return to_mesh(self, mesh, user_location())

    def slice_mesh(self, **coords: Any) -> "DTensor":
        return slice_mesh(self, coords, user_location())

    def __repr__(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        dims = ", ".join(f"{n}={s}" for n, s in zip(self._mesh._view.names, self._mesh._view.sizes))
        grad = ", requires_grad=True" if self.requires_grad else ""
        stream = "" if self._ref.stream._default else f", stream={self._ref.stream.name!r}"
        return (
            f"monarch.Tensor(shape={tuple(self.shape)}, dtype={self.dtype}, "
            f"mesh={{{dims}}}{stream}{grad})"
        )

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __bool__(self) -> bool:
        raise RuntimeError(
            "the value of a distributed tensor lives on the workers: use "
            "monarch.inspect(t) or fetch_shard(t).get() to bring it to the controller"
        )

    def __reduce_ex__(self, proto: Any) -> Any:
        raise TypeError("distributed tensors cannot be pickled")

    def __deepcopy__(self, memo: Any) -> "DTensor":
        return dispatch(torch.ops.aten.clone.default, (self,), {}, None)


def _new_dtensor(fake: torch.Tensor, mesh: Any, stream: Stream,
                 device: Optional[torch.device] = None) -> DTensor:
    d = DTensor(fake, mesh, _Ref(mesh._session, mesh, stream))
    d._device = device
    return d


def _intended_device(t: Any) -> Optional[torch.device]:
    """The device a distributed tensor has on the workers when it differs from
    its fake's (a CUDA tensor traced on a machine without a GPU); else None."""
    return getattr(t, "_device", None)


# Ops whose device argument torch and autograd fill in from an input tensor
# (``ones_like(x)`` for a gradient seed): on a machine without a GPU that is
# the input's CPU fake, so the recorded op takes the input's real device.
_DEVICE_FROM_INPUT = {
    "aten::empty_like", "aten::zeros_like", "aten::ones_like", "aten::full_like",
    "aten::rand_like", "aten::randn_like", "aten::randint_like", "aten::new_empty",
    "aten::new_empty_strided", "aten::new_zeros", "aten::new_ones", "aten::new_full",
}


# Ops that take tensors of different devices in torch (copies between
# devices, indexing with CPU indices): the device check below skips them.
_CROSS_DEVICE = {
    "aten::copy_", "aten::_to_copy", "aten::_copy_from", "aten::_copy_from_and_resize",
    "aten::to", "aten::index", "aten::index_put", "aten::index_put_",
    "aten::_index_put_impl_", "aten::set_", "aten::lift", "aten::lift_fresh",
    "aten::lift_fresh_copy",
}


def _device_of(t: "DTensor") -> torch.device:
    """The device ``t`` lives on on the workers."""
    d = getattr(t, "_device", None)
    return d if d is not None else t._fake.device


def _device_mix(what: str, a: torch.device, b: torch.device) -> RuntimeError:
    return RuntimeError(
        f"{what}: expected all tensors to be on the same device, but found {a} and {b}. A "
        "tensor or nn.Module made under activate() without device= lives on the CPU: create "
        "it with device=\"cuda\" or move it with .to(\"cuda\") (Module.to moves its "
        "parameters)")


def _check_devices(what: str, name: str, dts: List["DTensor"]) -> None:
    """torch's rule, applied on the controller where the fake tensors cannot
    (on a machine without a GPU they are all on the CPU): the tensors of an
    op share one device type, CPU 0-d tensors (scalars) excepted. So a
    program that mixes devices fails at the same call on a laptop as on the
    GPU cluster. Device indices do not count: every worker maps ``cuda:N``
    to its own GPU."""
    if len(dts) < 2 or name in _CROSS_DEVICE:
        return
    first: Optional[torch.device] = None
    for t in dts:
        d = _device_of(t)
        if d.type == "cpu" and t._fake.dim() == 0:
            continue
        if first is None:
            first = d
        elif d.type != first.type:
            raise _device_mix(what, first, d)


# -- active mesh ---------------------------------------------------------------------

_mesh_stack: List[Any] = []


class _CaptureMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return dispatch(func, args, kwargs or {}, _mesh_stack[-1] if _mesh_stack else None)


_mode: Optional[_CaptureMode] = None
_fmode: Optional[torch.overrides.TorchFunctionMode] = None

# Without a GPU, torch refuses device="cuda" before dispatch; a torch-function
# mode runs such calls with device "cpu" and remembers the device asked for,
# which is what the workers receive (they map it to the CPU, with a warning).
_device_override: Optional[torch.device] = None


def _is_cuda(x: Any) -> bool:
    if isinstance(x, torch.device):
        return x.type == "cuda"
    return isinstance(x, str) and x.startswith("cuda")


class _CudaOnCpuMode(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        global _device_override
        kwargs = dict(kwargs or {})
        asked: Optional[torch.device] = None
        name = getattr(func, "__name__", "")
        move = False  # t.cuda() / t.to("cuda"): a copy to the device asked for
        if name == "to" and args and isinstance(args[0], DTensor) and _is_cuda(
            kwargs.get("device")
        ):
            asked = torch.device(kwargs.pop("device"))
            move = True
        elif _is_cuda(kwargs.get("device")):
            asked = torch.device(kwargs["device"])
            kwargs["device"] = torch.device("cpu")
        if name == "cuda" and args and isinstance(args[0], DTensor):
            asked = torch.device("cuda") if len(args) < 2 else torch.device("cuda", args[1])
            func, args, kwargs, move = torch.Tensor.to, (args[0],), {}, True
        elif name == "to" and args and isinstance(args[0], DTensor):
            new_args = [a for a in args[1:] if not _is_cuda(a)]
            if len(new_args) != len(args) - 1:
                asked = torch.device(next(a for a in args[1:] if _is_cuda(a)))
                move = True
            args = (args[0], *new_args)
        if asked is None:
            return func(*args, **kwargs)
        prev = _device_override
        _device_override = asked
        try:
            out = func(*args, **kwargs)
            if move:
                out = torch.ops.aten._to_copy.default(out, device=torch.device("cpu"))
            return out
        finally:
            _device_override = prev


@contextlib.contextmanager
def activate(mesh: Any) -> Iterator[Any]:
    """Run torch calls inside on every rank of ``mesh``."""
    global _mode, _fmode
    _mesh_stack.append(mesh)
    entered = False
    fmode = None
    if _mode is None:
        if not _CUDA:
            fmode = _fmode = _CudaOnCpuMode()
            fmode.__enter__()
        _mode = _CaptureMode()
        _mode.__enter__()
        entered = True
    try:
        yield mesh
    finally:
        _mesh_stack.pop()
        if entered:
            mode, _mode = _mode, None
            mode.__exit__(None, None, None)
            if fmode is not None:
                _fmode = None
                fmode.__exit__(None, None, None)


@contextlib.contextmanager
def _local() -> Iterator[None]:
    """Plain local torch inside an active mesh (the frontend's own work)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    from torch.utils._python_dispatch import _pop_mode_temporarily as pop_dispatch

    with contextlib.ExitStack() as stack:
        if _mode is not None and _get_current_dispatch_mode() is _mode:
            stack.enter_context(pop_dispatch())
        if _fmode is not None and torch.overrides._get_current_function_mode() is _fmode:
            stack.enter_context(torch.overrides._pop_mode_temporarily())
        yield


def _internal(fn: Any) -> Any:
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _local():
            return fn(*args, **kwargs)

    return wrapper


def active_mesh() -> Any:
    return _mesh_stack[-1] if _mesh_stack else None


# -- checks ---------------------------------------------------------------------------


def _check_use(t: DTensor, mesh: Any, stream: Stream, what: str) -> None:
    ref = t._ref
    if ref.borrow is not None and ref.borrow.dropped:
        raise usage(
            "DROPPED",
            f"{what} uses a borrowed tensor after its borrow was dropped at "
            f"{ref.borrow.dropped_at}",
        )
    if ref.mut_borrow is not None:
        raise usage(
            "BORROWED",
            f"{what} uses a tensor that is mutably borrowed onto stream "
            f"{ref.mut_borrow._stream.name!r} (borrowed at {ref.mut_borrow.location}); drop "
            "the borrow first",
        )
    if mesh is not None and not t._mesh._same_mesh(mesh):
        raise usage(
            "WRONG_MESH",
            f"{what} uses a tensor on mesh {t._mesh._describe()} while running on mesh "
            f"{mesh._describe()}; move it with to_mesh",
        )
    if ref.stream is not stream:
        raise usage(
            "WRONG_STREAM",
            f"{what} uses a tensor owned by stream {ref.stream.name!r} on stream "
            f"{stream.name!r}; borrow it onto the stream first",
        )


def _check_mutate(t: DTensor, what: str) -> None:
    ref = t._ref
    if ref.ro_borrows and any(not b.dropped for b in ref.ro_borrows):
        b = next(b for b in ref.ro_borrows if not b.dropped)
        raise usage(
            "MUTATING_BORROW",
            f"{what} would mutate a tensor while it is borrowed read-only onto stream "
            f"{b._stream.name!r} (borrowed at {b.location})",
        )
    if ref.borrow is not None and not ref.borrow.mutable:
        raise usage(
            "MUTATING_BORROW",
            f"{what} would mutate a read-only borrow (borrowed at {ref.borrow.location}); "
            "borrow it with mutable=True",
        )


def _check_no_grad(t: DTensor, what: str) -> None:
    if t.requires_grad and torch.is_grad_enabled():
        raise usage(
            "REQUIRES_GRAD",
            f"{what} of a tensor that requires grad is not differentiable; use "
            "t.detach() or torch.no_grad()",
        )


def _sink(session: Any) -> Any:
    from . import _trace_mlir

    tracer = _trace_mlir.current()
    if tracer is not None:
        return tracer
    return session.eager


# -- dispatch ------------------------------------------------------------------------------

_LIFT = {"aten::lift_fresh", "aten::lift", "aten::lift_fresh_copy"}


def _to_fake(x: Any, dev_map: bool = True) -> Any:
    if isinstance(x, DTensor):
        return x._fake
    if isinstance(x, torch.device) and x.type == "cuda" and not _CUDA:
        return torch.device("cpu")
    if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor):
        return _fake_mode.from_tensor(x)
    return x


def _numbers_to_tensors(schema: Any, args: Tuple, kwargs: Dict[str, Any],
                        dts: List[DTensor]) -> Tuple[Tuple, Dict[str, Any]]:
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
    fake_args, fake_kwargs = tree_map(_to_fake, (args, kwargs))
    with _fake_mode:
        out = func(*fake_args, **fake_kwargs)
    if any(isinstance(o, torch.Tensor) for o in tree_flatten(out)[0]):
        raise RuntimeError(f"{func._schema.name} returned a tensor: not a metadata query")
    return out


def _undefined_result(mesh: Any, stream: Stream) -> DTensor:
    """The result ref of a `Tensor` return the op left undefined: never
    handed to the program (it sees None), deleted once the op is sent."""
    with _fake_mode:
        fake = torch.empty((0,))
    return _new_dtensor(fake, mesh, stream)


def _name(func: Any) -> Tuple[str, str]:
    s = func._schema
    return s.name, s.overload_name


def dispatch(func: Any, args: Tuple, kwargs: Dict[str, Any], mesh: Any) -> Any:
    loc = user_location()
    name, overload = _name(func)
    what = f"{name}" + (f".{overload}" if overload else "")
    flat, _ = tree_flatten((args, kwargs))
    dts = [a for a in flat if isinstance(a, DTensor)]
    if mesh is None:
        if not dts:
            return func(*args, **kwargs)
        mesh = dts[0]._mesh
    if name in _METADATA_OPS:
        return _answer_metadata(func, args, kwargs)
    stream = _stream.get_active_stream()
    schema = func._schema

    # Local tensors: 0-d ones are constants (Python numbers arrive as wrapped
    # 0-d tensors), anything else is a LOCAL_TENSOR misuse.
    consts: Dict[int, torch.Tensor] = {}
    for a in flat:
        if isinstance(a, torch.Tensor) and not isinstance(a, DTensor):
            if name in _LIFT or a.dim() == 0:
                consts[id(a)] = a
            else:
                raise usage(
                    "LOCAL_TENSOR",
                    f"{what} mixes a local tensor (shape {tuple(a.shape)}) with the mesh "
                    f"{mesh._describe()}; create it inside mesh.activate() or move it there",
                )
    for t in dts:
        _check_use(t, mesh, stream, what)
    written: List[DTensor] = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            v = args[i] if i < len(args) else kwargs.get(arg.name)
            for x in tree_flatten(v)[0]:
                if isinstance(x, DTensor):
                    written.append(x)
    for t in written:
        _check_mutate(t, what)
    _check_devices(what, name, dts)

    fake_args, fake_kwargs = tree_map(_to_fake, (args, kwargs))
    if name == "aten::arange" and fake_kwargs.get("dtype") is None:
        # torch 1.13's meta arange infers int64 from float bounds; CPU does not.
        if any(isinstance(a, float) for a in fake_args):
            fake_kwargs["dtype"] = torch.get_default_dtype()
    try:
        if name in _LIFT:
            # torch.tensor(data) inside activate: the data is a constant.
            out = _fake_mode.from_tensor(args[0])
        else:
            with _fake_mode:
                out = func(*fake_args, **fake_kwargs)
    except Exception as e:  # shape errors and friends: raise at the call site
        text = str(e)
        if "found two different devices" in text:  # FakeTensor's wording of a mix
            devices = [_device_of(t) for t in dts]
            raise _device_mix(what, devices[0], next(
                (d for d in devices if d != devices[0]), devices[0])) from None
        if type(e) in (RuntimeError, ValueError, TypeError, IndexError):
            raise type(e)(str(e)) from None
        raise

    by_fake = {id(t._fake): t for t in written}
    results: List[DTensor] = []
    from_input = next((d for d in map(_intended_device, dts) if d is not None), None)
    if _device_override is not None:
        result_device: Optional[torch.device] = _device_override
    else:
        explicit = next((x for x in flat if isinstance(x, torch.device)), None)
        if explicit is not None and not (name in _DEVICE_FROM_INPUT and explicit.type == "cpu"):
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
                o = _fake_mode.from_tensor(o)
            d = _new_dtensor(o, mesh, stream, result_device)
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
    real = _device_override
    if real is None and name in _DEVICE_FROM_INPUT:
        real = from_input
    if real is not None:
        def redevice(x: Any) -> Any:
            if isinstance(x, torch.device) and x.type == "cpu":
                return real
            return x

        args, kwargs = tree_map(redevice, (args, kwargs))
    _sink(mesh._session).op(func, args, kwargs, results, consts, mesh, stream, loc)
    return wrapped


# -- mesh-level operations ---------------------------------------------------------------


def _normalize_dims(view: Any, dims: Union[str, Sequence[str]]) -> Tuple[Tuple[str, ...], List[str]]:
    if isinstance(dims, str):
        given: Tuple[str, ...] = (dims,)
    else:
        given = tuple(dims)
    for d in given:
        if not isinstance(d, str):
            raise TypeError(f"reduce dims must be names (str), got {type(d).__name__}")
    seen = set()
    for d in given:
        view.lookup(d)
        if d in seen:
            raise ValueError(f"dimension '{d}' named twice")
        seen.add(d)
    resolved = list(given) if given else list(view.names)
    return given, resolved


@_internal
def reduce_tensor(
    t: Any,
    dims: Union[str, Sequence[str]],
    reduction: str,
    scatter: bool,
    inplace: bool,
    out: Optional[DTensor],
    loc: str,
) -> DTensor:
    what = "reduce_" if inplace else "reduce"
    if not isinstance(t, DTensor):
        raise usage("LOCAL_TENSOR", f"{what} of a local tensor: only distributed tensors reduce")
    mesh = t._mesh
    stream = _stream.get_active_stream()
    _check_use(t, None, stream, what)
    _check_no_grad(t, what)
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"unknown reduction '{reduction}' (one of {', '.join(REDUCTIONS)})"
        )
    view = mesh._view
    given, resolved = _normalize_dims(view, dims)
    n = view.size(resolved)
    stack = reduction == "stack"
    if (stack or scatter) and len(resolved) > 1:
        raise ValueError(
            f"{'stack' if stack else 'scatter'} reduces over one dimension, got "
            f"{len(resolved)} ({', '.join(resolved)})"
        )
    if inplace and scatter:
        raise ValueError("reduce_ (in place) cannot scatter")
    if inplace and stack:
        raise ValueError("reduce_ (in place) cannot stack: the shape changes")
    if inplace and out is not None:
        raise ValueError("reduce_ (in place) cannot take out=")
    shape = list(t.shape)
    if scatter and not stack:
        if not shape or shape[0] != n:
            raise ValueError(
                f"reduce with scatter needs the leading size to equal the {n} ranks reduced "
                f"over, got shape {tuple(shape)}"
            )
        new_shape = shape[1:]
    elif scatter and stack:
        if not shape or shape[0] % n != 0:
            raise ValueError(
                f"stack with scatter needs the leading size to be a multiple of {n}, got "
                f"shape {tuple(shape)}"
            )
        new_shape = shape
    elif stack:
        new_shape = [n] + shape
    else:
        new_shape = shape
    if inplace:
        _check_mutate(t, what)
        result = t
    elif out is not None:
        if not isinstance(out, DTensor):
            raise usage("LOCAL_TENSOR", "reduce out= must be a distributed tensor")
        _check_use(out, mesh, stream, what)
        _check_mutate(out, what)
        if list(out.shape) != new_shape or out.dtype != t.dtype:
            raise ValueError(
                f"reduce out= has shape {tuple(out.shape)} and dtype {out.dtype}, the result "
                f"has shape {tuple(new_shape)} and dtype {t.dtype}"
            )
        result = out
    else:
        with _fake_mode:
            fake = torch.empty(new_shape, dtype=t.dtype, device=t._fake.device)
        result = _new_dtensor(fake, mesh, stream, _intended_device(t))
    _sink(mesh._session).reduce(t, result, given, reduction, scatter, inplace, out, stream, loc)
    return result


def reduce(
    tensors: Any,
    dims: Union[str, Sequence[str]] = (),
    reduction: str = "sum",
    scatter: bool = False,
    mesh: Any = None,
    _inplace: bool = False,
) -> Any:
    """``t.reduce(...)`` over every distributed tensor of a pytree."""
    loc = user_location()

    def one(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return reduce_tensor(x, dims, reduction, scatter, _inplace, None, loc)
        return x

    return tree_map(one, tensors)


def reduce_(tensors: Any, dims: Union[str, Sequence[str]] = (), reduction: str = "sum",
            scatter: bool = False, mesh: Any = None) -> Any:
    return reduce(tensors, dims, reduction, scatter, mesh, _inplace=True)


@_internal
def to_mesh(t: Any, dest: Any, loc: str) -> DTensor:
    if not isinstance(t, DTensor):
        raise usage("LOCAL_TENSOR", "to_mesh of a local tensor: create it on a mesh first")
    src = t._mesh
    if dest._session is not src._session:
        raise usage(
            "WRONG_MESH",
            f"to_mesh between meshes of different spawn_procs ({src._describe()} -> "
            f"{dest._describe()})",
        )
    stream = _stream.get_active_stream()
    _check_use(t, None, stream, "to_mesh")
    _check_no_grad(t, "to_mesh")
    for d in src._view.dims:
        i = dest._view.find(d.name)
        if i is None:
            raise ValueError(
                f"to_mesh between incompatible meshes: source dim '{d.name}' is not in the "
                "destination"
            )
        if dest._view.dims[i].size != d.size:
            raise ValueError(
                f"to_mesh between incompatible meshes: source dim '{d.name}' has size "
                f"{d.size} but size {dest._view.dims[i].size} in the destination"
            )
    with _fake_mode:
        fake = torch.empty_strided(
            t._fake.size(), t._fake.stride(), dtype=t.dtype, device=t._fake.device
        )
    result = _new_dtensor(fake, dest, stream, _intended_device(t))
    _sink(src._session).send(t, result, dest, stream, loc)
    return result


@_internal
def slice_mesh(t: Any, coords: Dict[str, Any], loc: str) -> DTensor:
    if not isinstance(t, DTensor):
        raise usage("LOCAL_TENSOR", "slice_mesh of a local tensor")
    _check_use(t, None, t._ref.stream, "slice_mesh")
    sub = t._mesh._derive("slice", coords)
    r = DTensor(t._fake, sub, t._ref)
    _sink(sub._session).slice_mesh(t, r, coords, loc)
    return r


@_internal
def fetch_shard(t: Any, coords: Optional[Dict[str, int]] = None, **kwargs: int) -> Any:
    """A future of one rank's value (on CPU); coordinates default to 0."""
    loc = user_location()
    coords = dict(coords or {})
    coords.update(kwargs)
    if not isinstance(t, DTensor):
        raise usage("LOCAL_TENSOR", "fetch_shard of a local tensor")
    _check_use(t, None, t._ref.stream, "fetch_shard")
    view = t._mesh._view
    full: Dict[str, int] = {}
    for name, c in coords.items():
        i = view.lookup(name)
        size = view.dims[i].size
        if isinstance(c, bool) or not isinstance(c, int):
            raise TypeError(f"coordinate of '{name}' must be an int, got {type(c).__name__}")
        if c < 0 or c >= size:
            raise IndexError(f"coordinate {c} is out of range for dim '{name}' of size {size}")
        full[name] = c
    for d in view.dims:
        full.setdefault(d.name, 0)
    return _sink(t._mesh._session).fetch(t, full, loc)


def inspect(t: Any, coords: Optional[Dict[str, int]] = None, **kwargs: int) -> Any:
    """fetch_shard(...).get(): one rank's value on the controller."""
    if not isinstance(t, DTensor):
        return t
    return fetch_shard(t, coords, **kwargs).get()


def show(t: Any, coords: Optional[Dict[str, int]] = None, **kwargs: int) -> None:
    print(inspect(t, coords, **kwargs))


@_internal
def rank(mesh: Any, dims: Union[str, Sequence[str]]) -> DTensor:
    loc = user_location()
    if isinstance(dims, str):
        names: Tuple[str, ...] = (dims,)
    else:
        names = tuple(dims)
    if not names:
        raise ValueError("rank needs at least one dimension")
    seen = set()
    for d in names:
        mesh._view.lookup(d)
        if d in seen:
            raise ValueError(f"dimension '{d}' named twice")
        seen.add(d)
    stream = _stream.get_active_stream()
    with _fake_mode:
        fake = torch.empty((), dtype=torch.int64)
    result = _new_dtensor(fake, mesh, stream)
    _sink(mesh._session).rank(mesh, names, result, stream, loc)
    return result


@_internal
def borrow(stream: Stream, t: Any, mutable: bool) -> Tuple[DTensor, Borrow]:
    loc = user_location()
    if not isinstance(t, DTensor):
        raise usage("LOCAL_TENSOR", "borrow of a local tensor")
    origin = t._ref.stream
    _check_use(t, None, origin, "borrow")
    if t.requires_grad:
        raise usage(
            "REQUIRES_GRAD",
            "borrow of a tensor that requires grad: borrow t.detach() or a gradient instead",
        )
    if origin is stream:
        raise usage("WRONG_STREAM", f"borrow onto stream {stream.name!r}, which already owns it")
    if mutable and any(not b.dropped for b in t._ref.ro_borrows):
        b = next(b for b in t._ref.ro_borrows if not b.dropped)
        raise usage(
            "MUTATING_BORROW",
            f"mutable borrow of a tensor that is borrowed read-only (at {b.location})",
        )
    if t._ref.borrow is not None and not t._ref.borrow.mutable and mutable:
        raise usage("MUTATING_BORROW", "mutable borrow of a read-only borrow")
    session = t._mesh._session
    rref = _Ref(session, t._mesh, stream, owns=False)
    r = DTensor(t._fake, t._mesh, rref)
    b = Borrow(session, session.new_borrow(), t._ref, rref, mutable, t._mesh, origin, stream, loc)
    rref.borrow = b
    if mutable:
        t._ref.mut_borrow = b
    else:
        t._ref.ro_borrows.append(b)
    _sink(session).borrow(t, r, b, loc)
    return r, b


@_internal
def drop_borrow(b: Borrow, loc: str) -> None:
    origin: _Ref = b._origin_ref
    if origin.mut_borrow is b:
        origin.mut_borrow = None
    if b in origin.ro_borrows:
        origin.ro_borrows.remove(b)
    b.dropped_at = loc or "<unknown>"
    _sink(b._session).drop(b, loc)


class _GradGenerator:
    """Runs backward incrementally: each ``next()`` lets the backward pass
    (on a helper thread, strictly alternating with the caller, so only one of
    them issues operations at a time) run until the next param's gradient is
    computed. Gradients come in the order given; a gradient computed before
    its turn is kept until then. Each backward op runs on the stream that was
    active when the generator was made (the forward's)."""

    def __init__(self, loss: Any, params: Sequence[Any], grad: Any = None):
        import threading

        self._loss = loss
        self._params = list(params)
        self._grad = grad
        self._stream = _stream.get_active_stream()
        self._buf: Dict[int, Any] = {}
        self._next = 0
        self._done = False
        self._error: Optional[BaseException] = None
        self._abort = False
        self._cond = threading.Condition()
        self._owner = "caller"
        self._thread: Optional[Any] = None

    def __iter__(self) -> "_GradGenerator":
        return self

    def __next__(self) -> Any:
        if self._next >= len(self._params):
            while not self._done:
                self._resume()
            self._raise()
            raise StopIteration
        i = self._next
        while i not in self._buf and not self._done:
            self._resume()
        self._raise()
        self._next += 1
        return self._buf.pop(i, None)

    def _raise(self) -> None:
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def close(self) -> None:
        if self._thread is not None and not self._done:
            self._abort = True
            while not self._done:
                self._resume()
        self._error = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # -- turns -------------------------------------------------------------------
    def _resume(self) -> None:
        import threading

        prev = _stream.set_active_stream(self._stream)
        try:
            with self._cond:
                self._owner = "backward"
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="monarch-grad-generator", daemon=True
                    )
                    self._thread.start()
                self._cond.notify_all()
                self._cond.wait_for(lambda: self._owner == "caller")
        finally:
            _stream.set_active_stream(prev)

    def _yield_turn(self) -> None:
        with self._cond:
            self._owner = "caller"
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._owner == "backward")

    def _producers(self) -> Dict[int, List[Tuple[Any, int]]]:
        """For each param, the backward nodes (and output slots) whose output is
        its gradient: the nodes feeding its AccumulateGrad."""
        index = {id(p): i for i, p in enumerate(self._params)}
        found: Dict[int, List[Tuple[Any, int]]] = {}
        roots = self._loss if isinstance(self._loss, (list, tuple)) else [self._loss]
        stack = [t.grad_fn for t in roots if t.grad_fn is not None]
        seen = set()
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            for k, (nxt, _) in enumerate(node.next_functions):
                if nxt is None:
                    continue
                if type(nxt).__name__ == "AccumulateGrad":
                    i = index.get(id(nxt.variable))
                    if i is not None:
                        found.setdefault(i, []).append((node, k))
                else:
                    stack.append(nxt)
        return found

    def _run(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._owner == "backward")
        handles = []
        try:
            # A param with one producer gets its gradient from that node's
            # post-hook, as soon as it runs; others (used twice, or unused)
            # from the result at the end.
            for i, producers in self._producers().items():
                if len(producers) != 1:
                    continue
                node, k = producers[0]

                def hook(grad_inputs: Any, grad_outputs: Any, i: int = i, k: int = k) -> None:
                    if self._abort:
                        raise _Aborted()
                    self._buf[i] = grad_inputs[k]
                    if i == self._next:
                        self._yield_turn()
                        if self._abort:
                            raise _Aborted()

                handles.append(node.register_hook(hook))
            wanted = [i for i, p in enumerate(self._params) if p.requires_grad]
            mode = _CaptureMode() if _mesh_stack else None
            if mode is not None:
                mode.__enter__()
            try:
                grads = torch.autograd.grad(
                    self._loss,
                    [self._params[i] for i in wanted],
                    grad_outputs=self._grad,
                    allow_unused=True,
                )
            finally:
                if mode is not None:
                    mode.__exit__(None, None, None)
            for i, g in zip(wanted, grads):
                if i >= self._next and i not in self._buf:
                    self._buf[i] = g
        except _Aborted:
            pass
        except BaseException as e:  # raised to the caller at its next()
            self._error = e
        finally:
            for h in handles:
                h.remove()
            with self._cond:
                self._done = True
                self._owner = "caller"
                self._cond.notify_all()


class _Aborted(Exception):
    pass


def grad_generator(loss: Any, params: Sequence[Any], grad: Any = None) -> Iterator[Any]:
    """Yields the gradient of each param of ``loss``, in the order given, running
    the backward pass incrementally: pass params in reverse order of use
    (``reversed(list(model.parameters()))``) to get each gradient as soon as
    it is computed, and reduce it while the rest of the backward runs."""
    return _GradGenerator(loss, params, grad)
