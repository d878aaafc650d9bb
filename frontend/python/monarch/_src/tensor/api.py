"""``monarch.Tensor`` and the tensor functions of ``monarch``'s public face.

:class:`DTensor` is the class of every distributed tensor: the wrapper of
``core.TensorCore`` plus Monarch's methods (``reduce``, ``to_mesh``,
``slice_mesh``, ...) and the ``__torch_dispatch__`` that captures ATen calls
on it. Importing this module registers it as the class results are made as.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import torch

from ..common.errors import usage
from ..common.location import user_location
from . import core, devices
from .collectives import reduce, reduce_, reduce_tensor
from .dispatch import _MISS, _cached_dispatch, dispatch
from .grad_generator import grad_generator
from .modes import local
from .movement import fetch_shard, inspect, show, slice_mesh, to_mesh
from .streams import Stream

__all__ = ["DTensor", "fetch_shard", "grad_generator", "inspect", "reduce", "reduce_", "show"]


class DTensor(core.TensorCore):
    """A tensor distributed over a proc mesh: one local tensor per rank."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[override]
        r = _cached_dispatch(func, args, kwargs, None)
        if r is _MISS:
            r = dispatch(func, args, kwargs or {}, None)
        return r

    # ``.data``: an alias without autograd history; assigning it (as
    # ``Module.to/cuda/double`` do) makes this tensor name the new value.
    @property
    def data(self) -> "DTensor":  # type: ignore[override]
        with local():
            return dispatch(torch.ops.aten.detach.default, (self,), {}, None)

    @data.setter
    def data(self, new: Any) -> None:
        if not isinstance(new, core.TensorCore):
            raise usage(
                "LOCAL_TENSOR",
                "assigning a local tensor to .data of a distributed tensor; create it on "
                "the mesh",
            )
        torch.Tensor.data.__set__(self, new)  # type: ignore[attr-defined]
        self._spec = new._spec
        self._fake_tensor = new._fake_tensor
        self._ref = new._ref
        self._mesh = new._mesh
        self._device = new._device

    # ``.to(...)`` / ``.cuda()``: torch's own on a controller with a GPU; on one
    # without, torch refuses a CUDA device before dispatch, so a move to CUDA
    # is the ``_to_copy`` op it would dispatch (devices.to_cuda).
    def to(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if not core.HAS_CUDA:
            copy = bool(kwargs.pop("copy", False))
            # copy, given by position: to(device, dtype, non_blocking, copy),
            # to(dtype, non_blocking, copy), to(other, non_blocking, copy).
            if len(args) == (3 if args and isinstance(args[0], (torch.dtype, torch.Tensor))
                             else 4):
                args, copy = args[:-1], bool(args[-1])
            device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
            if device is not None and device.type == "cuda":
                return devices.to_cuda(self, device, dtype, non_blocking, copy, memory_format)
            if copy:
                kwargs["copy"] = True
        return torch.Tensor.to(self, *args, **kwargs)

    def cuda(self, device: Any = None, non_blocking: bool = False,  # type: ignore[override]
             memory_format: torch.memory_format = torch.preserve_format) -> Any:
        if core.HAS_CUDA:
            return torch.Tensor.cuda(self, device, non_blocking, memory_format=memory_format)
        d = torch.device("cuda", device) if isinstance(device, int) else torch.device(
            device if device is not None else "cuda")
        if d.type != "cuda":
            raise RuntimeError(f"Invalid device, must be cuda device (got {d})")
        return devices.to_cuda(self, d, None, non_blocking, False, memory_format)

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
        raise TypeError("distributed tensors cannot be pickled: an actor endpoint called with "
                        "one gets its local shard (an argument of the call, not inside a "
                        "constructor or a mesh reference); monarch.inspect(t) or "
                        "fetch_shard(t).get() brings a value to the controller")

    def __deepcopy__(self, memo: Any) -> "DTensor":
        return dispatch(torch.ops.aten.clone.default, (self,), {}, None)


core.register_tensor_class(DTensor)
