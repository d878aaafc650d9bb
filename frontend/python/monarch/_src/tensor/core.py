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

from typing import TYPE_CHECKING, Any, List, Optional

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

if TYPE_CHECKING:  # pragma: no cover
    from .borrows import Borrow
    from .streams import Stream

#: The one fake-tensor mode: metadata (shape, dtype, device) of every op.
fake_mode = FakeTensorMode()
HAS_CUDA = torch.cuda.is_available()


class Ref:
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

    def __init__(self, session: Any, mesh: Any, stream: "Stream", owns: bool = True):
        self.session = session
        self.id = session.new_ref()
        self.mesh = mesh
        self.stream = stream
        self.owns = owns
        self.borrow: Optional["Borrow"] = None  # the borrow that made this ref
        self.mut_borrow: Optional["Borrow"] = None  # a live mutable borrow of it
        self.ro_borrows: List["Borrow"] = []  # live read-only borrows of it

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


class TensorCore(torch.Tensor):
    """The wrapper subclass itself: metadata from ``_fake``, workers' values
    named by ``_ref``, on ``_mesh``; ``_device`` is the device the workers
    really use when it differs from the fake's (CUDA asked for on a machine
    without a GPU)."""

    _fake: torch.Tensor
    _ref: Ref
    _mesh: Any
    _device: Optional[torch.device]

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, fake: torch.Tensor, mesh: Any, ref: Ref) -> "TensorCore":
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
        r._device = None
        return r

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


_tensor_class: Any = TensorCore


def register_tensor_class(cls: type) -> None:
    """Results are made as ``cls`` (api.DTensor) from now on."""
    global _tensor_class
    _tensor_class = cls


def view_of(t: TensorCore, mesh: Any, ref: Ref) -> TensorCore:
    """Another handle with ``t``'s metadata (a slice of its mesh, a borrow)."""
    d = _tensor_class(t._fake, mesh, ref)
    d._device = t._device
    return d


def new_dtensor(fake: torch.Tensor, mesh: Any, stream: "Stream",
                device: Optional[torch.device] = None) -> TensorCore:
    """A new result on ``mesh``/``stream`` with a fresh ref."""
    d = _tensor_class(fake, mesh, Ref(mesh._session, mesh, stream))
    d._device = device
    return d


def intended_device(t: Any) -> Optional[torch.device]:
    """The device a distributed tensor has on the workers when it differs from
    its fake's (a CUDA tensor traced on a machine without a GPU); else None."""
    return getattr(t, "_device", None)


def device_of(t: TensorCore) -> torch.device:
    """The device ``t`` lives on on the workers."""
    d = t._device
    return d if d is not None else t._fake.device
