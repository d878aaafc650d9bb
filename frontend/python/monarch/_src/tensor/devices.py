"""Devices of distributed tensors (docs/python.md, "Devices").

A tensor created with ``device="cuda"`` lives on its worker's GPU; on a
worker without a GPU the workers map ``cuda`` to the CPU with one warning,
and on a controller without a GPU torch refuses ``device="cuda"`` before
dispatch -- :class:`CudaOnCpuMode` runs such calls with the CPU and
remembers the device asked for, which is what the workers receive. The
controller applies torch's device rule itself (:func:`check_devices`), so a
program that mixes devices fails at the same call on a laptop as on a GPU
cluster.
"""

from __future__ import annotations

from typing import Any, List, Optional

import torch

from .core import HAS_CUDA, TensorCore, device_of

# Ops whose device argument torch and autograd fill in from an input tensor
# (``ones_like(x)`` for a gradient seed): on a machine without a GPU that is
# the input's CPU fake, so the recorded op takes the input's real device.
DEVICE_FROM_INPUT = {
    "aten::empty_like", "aten::zeros_like", "aten::ones_like", "aten::full_like",
    "aten::rand_like", "aten::randn_like", "aten::randint_like", "aten::new_empty",
    "aten::new_empty_strided", "aten::new_zeros", "aten::new_ones", "aten::new_full",
}

# Ops that take tensors of different devices in torch (copies between
# devices, indexing with CPU indices): the device check skips them.
CROSS_DEVICE = {
    "aten::copy_", "aten::_to_copy", "aten::_copy_from", "aten::_copy_from_and_resize",
    "aten::to", "aten::index", "aten::index_put", "aten::index_put_",
    "aten::_index_put_impl_", "aten::set_", "aten::lift", "aten::lift_fresh",
    "aten::lift_fresh_copy",
}


def device_mix(what: str, a: torch.device, b: torch.device) -> RuntimeError:
    return RuntimeError(
        f"{what}: expected all tensors to be on the same device, but found {a} and {b}. A "
        "tensor or nn.Module made under activate() without device= lives on the CPU: create "
        "it with device=\"cuda\" or move it with .to(\"cuda\") (Module.to moves its "
        "parameters)")


def check_devices(what: str, name: str, dts: List[TensorCore]) -> None:
    """torch's rule, applied on the controller where the fake tensors cannot
    (on a machine without a GPU they are all on the CPU): the tensors of an
    op share one device type, CPU 0-d tensors (scalars) excepted. Device
    indices do not count: every worker maps ``cuda:N`` to its own GPU."""
    if len(dts) < 2 or name in CROSS_DEVICE:
        return
    first: Optional[torch.device] = None
    for t in dts:
        d = device_of(t)
        if d.type == "cpu" and len(t._spec.shape) == 0:
            continue
        if first is None:
            first = d
        elif d.type != first.type:
            raise device_mix(what, first, d)


#: The device a call under CudaOnCpuMode asked for (None: none was).
device_override: Optional[torch.device] = None


def is_cuda(x: Any) -> bool:
    if isinstance(x, torch.device):
        return x.type == "cuda"
    return isinstance(x, str) and x.startswith("cuda")


class CudaOnCpuMode(torch.overrides.TorchFunctionMode):
    """``device="cuda"``, ``.cuda()`` and ``.to("cuda")`` on a controller
    without a GPU: run with the CPU, remember the device asked for."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        global device_override
        kwargs = dict(kwargs or {})
        asked: Optional[torch.device] = None
        name = getattr(func, "__name__", "")
        move = False  # t.cuda() / t.to("cuda"): a copy to the device asked for
        if name == "to" and args and isinstance(args[0], TensorCore) and is_cuda(
            kwargs.get("device")
        ):
            asked = torch.device(kwargs.pop("device"))
            move = True
        elif is_cuda(kwargs.get("device")):
            asked = torch.device(kwargs["device"])
            kwargs["device"] = torch.device("cpu")
        if name == "cuda" and args and isinstance(args[0], TensorCore):
            asked = torch.device("cuda") if len(args) < 2 else torch.device("cuda", args[1])
            func, args, kwargs, move = torch.Tensor.to, (args[0],), {}, True
        elif name == "to" and args and isinstance(args[0], TensorCore):
            # t.to(device, dtype, non_blocking) -- as Module.to calls it: the
            # device asked for is replaced by the CPU, in place.
            if any(is_cuda(a) for a in args[1:]):
                asked = torch.device(next(a for a in args[1:] if is_cuda(a)))
                move = True
                args = (args[0], *[torch.device("cpu") if is_cuda(a) else a
                                   for a in args[1:]])
        if asked is None:
            return func(*args, **kwargs)
        prev = device_override
        device_override = asked
        try:
            out = func(*args, **kwargs)
            if move:
                out = torch.ops.aten._to_copy.default(out, device=torch.device("cpu"))
            return out
        finally:
            device_override = prev


_shared_gpu_warned = False


def warn_shared_gpus(ranks_per_host: int) -> None:
    """Says once per process when the local workers outnumber this host's
    GPUs: rank r uses ``cuda:(r % count)``, so several share one (correct,
    but they compete for it and its memory)."""
    global _shared_gpu_warned
    if _shared_gpu_warned or not HAS_CUDA:
        return
    count = torch.cuda.device_count()
    if 0 < count < ranks_per_host:
        _shared_gpu_warned = True
        import sys

        sys.stderr.write(
            f"monarch: warning: {ranks_per_host} worker processes share {count} GPU(s) of "
            f"this host (rank r uses cuda:(r % {count})); their CUDA tensors compete for "
            "the same device and memory\n")
