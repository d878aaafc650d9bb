"""Devices of distributed tensors (docs/python.md, "Devices").

A tensor created with ``device="cuda"`` lives on its worker's GPU; on a
worker without a GPU the workers map ``cuda`` to the CPU with one warning,
and on a controller without a GPU such calls run with the CPU and the
device asked for is remembered (``device_override``), which is what the
workers receive (see "CUDA requests on a controller without a GPU"). The
controller applies torch's device rule itself (:func:`check_devices`), so a
program that mixes devices fails at the same call on a laptop as on a GPU
cluster.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

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


#: The CUDA device the call being dispatched asked for on a controller
#: without a GPU, which runs it with the CPU (None: none was).
device_override: Optional[torch.device] = None


def is_cuda(x: Any) -> bool:
    if isinstance(x, torch.device):
        return x.type == "cuda"
    return isinstance(x, str) and x.startswith("cuda")


# -- CUDA requests on a controller without a GPU ------------------------------
#
# No function mode around every op (torch 1.x runs its function-mode stack in
# Python: a third of the eager per-op cost there). Instead:
# - ATen calls with a ``device`` argument asking for CUDA run with the CPU
#   and ``device_override`` set (dispatch.dispatch, :func:`cuda_asked`);
# - torch's own CUDA initialization, which a CPU-only build's factories run
#   before dispatch, is let through while a mesh is active
#   (:func:`install_cuda_on_cpu`);
# - ``torch.tensor`` / ``torch.as_tensor`` with ``device="cuda"`` (their copy
#   to the device happens inside torch, below the capture mode) make the CPU
#   constant under ``device_override``;
# - ``.to(...)`` / ``.cuda()`` of a distributed tensor are its own methods
#   (api.DTensor, :func:`to_cuda`): torch's refuse a CUDA device on a CPU-only
#   build before dispatch.


def cuda_asked(device_arg: Any, args: Any, kwargs: Any) -> Optional[torch.device]:
    """The CUDA device an ATen call asks for in its ``device`` argument
    (``device_arg``: its position and whether it is keyword-only), else None."""
    pos, kwonly = device_arg
    d = args[pos] if not kwonly and pos < len(args) else kwargs.get("device")
    if isinstance(d, torch.device) and d.type == "cuda":
        return d
    return None


def on_cpu(device_arg: Any, args: Any, kwargs: Any) -> Any:
    """The call's arguments with the CPU as its ``device``."""
    pos, kwonly = device_arg
    cpu = torch.device("cpu")
    if not kwonly and pos < len(args):
        return args[:pos] + (cpu,) + args[pos + 1:], kwargs
    return args, dict(kwargs, device=cpu)


_installed = False


def install_cuda_on_cpu(mesh_active: Callable[[], bool]) -> None:
    """Once per process, on a controller without a GPU (see above).
    ``mesh_active()`` says whether a mesh is active. torch remembers a CUDA
    initialization that succeeded, so after the first CUDA request inside a
    mesh, one outside fails in the dispatcher ("Could not run ... with
    arguments from the 'CUDA' backend") rather than in the initialization
    ("Torch not compiled with CUDA enabled"): an error either way."""
    global _installed
    if _installed or HAS_CUDA:
        return
    _installed = True
    import torch.cuda

    real_init = torch.cuda._lazy_init

    def lazy_init() -> None:
        if not mesh_active():
            real_init()

    torch.cuda._lazy_init = lazy_init
    torch.tensor = _constant_on_cpu(torch.tensor, mesh_active)
    torch.as_tensor = _constant_on_cpu(torch.as_tensor, mesh_active)


def _constant_on_cpu(make: Callable[..., Any], mesh_active: Callable[[], bool]) -> Callable[..., Any]:
    import functools

    @functools.wraps(make)
    def constant(*args: Any, **kwargs: Any) -> Any:
        global device_override
        asked = kwargs.get("device")
        if asked is None or not is_cuda(asked) or not mesh_active() \
                or device_override is not None:
            return make(*args, **kwargs)
        device_override = torch.device(asked)
        try:
            return make(*args, **dict(kwargs, device=torch.device("cpu")))
        finally:
            device_override = None

    return constant


def to_cuda(t: TensorCore, device: torch.device, dtype: Optional[torch.dtype],
            non_blocking: bool, copy: bool, memory_format: Any) -> Any:
    """``t.to(device=cuda...)`` on a controller without a GPU: ``t`` itself
    where torch would alias (already there, nothing to convert), else the
    copy as one ``_to_copy`` op asking for ``device``."""
    if not copy and device_of(t).type == "cuda" and (dtype is None or dtype == t.dtype) \
            and memory_format in (None, torch.preserve_format):
        return t
    kwargs: Dict[str, Any] = {"device": device, "non_blocking": non_blocking}
    if dtype is not None:
        kwargs["dtype"] = dtype
    if memory_format is not None:
        kwargs["memory_format"] = memory_format
    return torch.ops.aten._to_copy.default(t, **kwargs)


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
