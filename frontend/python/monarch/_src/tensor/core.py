"""What every part of the tensor frontend builds on: refs, the fake-tensor
mode, the tensor base class and the factory of results.

A distributed tensor is a torch wrapper subclass: it has the shape, dtype
and autograd state of one rank's local tensor (tracked with a fake tensor)
and a :class:`Ref` naming the per-rank tensors on the workers. The class
users see is ``api.DTensor`` (``monarch.Tensor``): it adds Monarch's methods
(``reduce``, ``to_mesh``, ...) and the ``__torch_dispatch__`` that captures
ATen calls. Modules below the API create results through :func:`new_dtensor`,
which instantiates the class the API module registers
(:func:`register_tensor_class`), so they need not import it.
"""

from __future__ import annotations

import gc
import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

if TYPE_CHECKING:  # pragma: no cover
    from .borrows import Borrow
    from .streams import Stream

#: The one fake-tensor mode: metadata (shape, dtype, device) of every op.
fake_mode = FakeTensorMode()
HAS_CUDA = torch.cuda.is_available()


class Lending:
    """The borrows a ref takes part in (DESIGN.md §6.4); most refs have none."""

    __slots__ = ("borrow", "mut_borrow", "ro_borrows")

    def __init__(self) -> None:
        self.borrow: Optional["Borrow"] = None  # the borrow that made this ref
        self.mut_borrow: Optional["Borrow"] = None  # a live mutable borrow of it
        self.ro_borrows: List["Borrow"] = []  # live read-only borrows of it


def _c_module() -> Any:
    """monarch._C, or None where it is not built or must not be loaded (a
    Python tensor worker carries its own copy of the plan schema)."""
    if os.environ.get("MONARCH_WORKER_KIND") == "tensor":
        return None
    from ..backend.workers import c_module

    return c_module()


_C = _c_module()

if _C is not None:
    #: A ref on the workers (``monarch._C.Ref``, frontend/csrc/Ref.cpp): deleted
    #: there when the last owned handle goes away. ``Ref(session, mesh, stream,
    #: owns=True)`` takes its ids from the session; ``Ref.fresh(session, mesh,
    #: stream, mesh_id, stream_id)`` is dispatch's hot path; ``lending`` is None
    #: until a borrow involves it (``lend()`` makes it).
    Ref = _C.Ref
    _C.set_lending(Lending)
else:
    class Ref:  # type: ignore[no-redef]
        """Without monarch._C no session runs, so no ref is ever made."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if os.environ.get("MONARCH_WORKER_KIND") == "tensor":
                raise RuntimeError(
                    "distributed tensors cannot be made inside a Python tensor worker "
                    "(this process runs one rank's local tensors)")
            from ..backend.workers import missing_message

            raise ImportError(missing_message())


def held_refs(session: Any) -> Dict[int, Ref]:
    """The owned Ref handles of ``session`` that Python still holds, by id:
    what a recorded body leaves alive (its results, a step's state).

    Cycles are collected first: a handle kept only by a reference cycle
    (autograd's graph, a frame) is garbage, and whether gc had got to it
    would otherwise decide whether an iteration leaves it alive -- two equal
    iterations then differ and a loop unrolls (seen on CUDA with Adam).

    Then the scan is repeated, letting other threads run, until two agree:
    a backward through CUDA tensors runs on autograd's device thread, which
    drops its last references to the graph's tensors only after the caller
    has resumed (it needs the GIL for that), so a scan right after
    ``backward()`` can count tensors about to die (seen as loops of equal
    iterations unrolling under load). Bounded: 50 ms."""
    ids = set(_scan_refs(session))  # ids only: holding a handle would keep it
    deadline = time.monotonic() + 0.05
    while True:
        time.sleep(0.001)  # releases the GIL to the threads finishing up
        held = _scan_refs(session)
        if held.keys() == ids or time.monotonic() > deadline:
            return held
        ids = set(held)


def _scan_refs(session: Any) -> Dict[int, Ref]:
    gc.collect()
    return {o.id: o for o in gc.get_objects()
            if type(o) is Ref and o.session is session and o.owns}


class Spec:
    """The metadata of one rank's local tensor: what a distributed tensor is
    made from and what the dispatch cache is keyed on. ``fake_device`` is
    the device of its fake tensor (and the wrapper), ``device`` the one the
    workers really use when it differs (CUDA asked for on a controller
    without a GPU), else None.

    Specs are interned (:meth:`get`): equal metadata is one object, so cache
    keys hash and compare them by identity."""

    __slots__ = ("shape", "stride", "offset", "dtype", "fake_device", "device", "__weakref__")

    def __init__(self, shape: Tuple[int, ...], stride: Tuple[int, ...], offset: int,
                 dtype: torch.dtype, fake_device: torch.device,
                 device: Optional[torch.device]):
        self.shape = shape
        self.stride = stride
        self.offset = offset
        self.dtype = dtype
        self.fake_device = fake_device
        self.device = device

    @classmethod
    def get(cls, shape: Tuple[int, ...], stride: Tuple[int, ...], offset: int,
            dtype: torch.dtype, fake_device: torch.device,
            device: Optional[torch.device]) -> "Spec":
        key = (shape, stride, offset, dtype, fake_device,
               device.type if device is not None else None)
        spec = _specs.get(key)
        if spec is None:
            if len(_specs) >= SPEC_LIMIT:
                _specs.clear()
            spec = _specs[key] = cls(shape, stride, offset, dtype, fake_device, device)
        return spec

    @classmethod
    def of(cls, fake: torch.Tensor, device: Optional[torch.device] = None) -> "Spec":
        return cls.get(tuple(fake.shape), tuple(fake.stride()), fake.storage_offset(),
                       fake.dtype, fake.device, device)

    def fake(self) -> torch.Tensor:
        """A fake tensor with this metadata (for ops not seen before)."""
        with fake_mode:
            base = torch.empty_strided(self.shape, self.stride, dtype=self.dtype,
                                       device=self.fake_device)
            if self.offset:
                base = torch.empty(self.offset + _extent(self.shape, self.stride),
                                   dtype=self.dtype, device=self.fake_device).as_strided(
                    self.shape, self.stride, self.offset)
        return base

    def __repr__(self) -> str:
        return f"<Spec {self.shape} {self.stride}+{self.offset} {self.dtype} {self.fake_device}>"


_specs: dict = {}
#: Bound on the distinct specs kept; past it the table starts afresh (specs
#: alive in tensors stay valid: only sharing is lost).
SPEC_LIMIT = 1 << 16


def _extent(shape: Tuple[int, ...], stride: Tuple[int, ...]) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride))


_make_wrapper = torch.Tensor._make_wrapper_subclass


class TensorCore(torch.Tensor):
    """The wrapper subclass itself: its metadata is one rank's local tensor's
    (``_spec``), the workers' values are named by ``_ref``, on ``_mesh``;
    ``_device`` is the device the workers really use when it differs from
    the wrapper's. The fake tensor (``_fake``) is made only when an op not
    seen before needs it."""

    _ref: Ref
    _mesh: Any
    _device: Optional[torch.device]
    _spec: Spec
    _fake_tensor: Optional[torch.Tensor]

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, fake: torch.Tensor, mesh: Any, ref: Ref) -> "TensorCore":
        return make_tensor(cls, Spec.of(fake), mesh, ref, fake)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    @property
    def _fake(self) -> torch.Tensor:
        f = self._fake_tensor
        if f is None:
            f = self._fake_tensor = self._spec.fake()
        return f


def make_tensor(cls: type, spec: Spec, mesh: Any, ref: Ref,
                fake: Optional[torch.Tensor] = None) -> TensorCore:
    r = _make_wrapper(cls, spec.shape, strides=spec.stride, storage_offset=spec.offset,
                      dtype=spec.dtype, device=spec.fake_device, requires_grad=False)
    r._spec = spec
    r._ref = ref
    r._mesh = mesh
    r._device = spec.device
    r._fake_tensor = fake
    return r


_tensor_class: Any = TensorCore


def register_tensor_class(cls: type) -> None:
    """Results are made as ``cls`` (api.DTensor) from now on."""
    global _tensor_class
    _tensor_class = cls


def view_of(t: TensorCore, mesh: Any, ref: Ref) -> TensorCore:
    """Another handle with ``t``'s metadata (a slice of its mesh, a borrow)."""
    return make_tensor(_tensor_class, t._spec, mesh, ref, t._fake_tensor)


def new_dtensor(fake: torch.Tensor, mesh: Any, stream: "Stream",
                device: Optional[torch.device] = None) -> TensorCore:
    """A new result on ``mesh``/``stream`` with a fresh ref."""
    return make_tensor(_tensor_class, Spec.of(fake, device), mesh,
                       Ref(mesh._session, mesh, stream), fake)


def contiguous(shape: Tuple[int, ...], dtype: torch.dtype, fake_device: torch.device,
               device: Optional[torch.device] = None) -> Spec:
    """The spec of a new contiguous tensor (results of collectives, moves)."""
    stride, acc = [], 1
    for n in reversed(shape):
        stride.append(acc)
        acc *= max(n, 1)
    return Spec.get(tuple(shape), tuple(reversed(stride)), 0, dtype, fake_device, device)


def result_of(spec: Spec, mesh: Any, stream: "Stream") -> TensorCore:
    """A new result from a cached spec (no fake tensor)."""
    return make_tensor(_tensor_class, spec, mesh, Ref(mesh._session, mesh, stream))


def intended_device(t: Any) -> Optional[torch.device]:
    """The device a distributed tensor has on the workers when it differs from
    its fake's (a CUDA tensor traced on a machine without a GPU); else None."""
    return getattr(t, "_device", None)


def device_of(t: TensorCore) -> torch.device:
    """The device ``t`` lives on on the workers."""
    d = t._device
    return d if d is not None else t._spec.fake_device
