"""Which mesh is active and which torch modes capture calls.

``mesh.activate()`` (``dispatch.activate``) pushes the mesh and, for the
outermost activation, enters the capture mode -- a ``TorchDispatchMode``
that turns every ATen call into an operation on the mesh -- and, on a
machine without a GPU, the mode that lets ``device="cuda"`` through
(``devices.CudaOnCpuMode``). The frontend's own torch work inside an active
mesh (fake tensors, the in-process simulation) runs under :func:`local`.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, List, Optional

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode
from torch.utils._python_dispatch import _pop_mode_temporarily as _pop_dispatch_mode

_mesh_stack: List[Any] = []
#: The capture mode while some mesh is active (dispatch.CaptureMode).
capture: Optional[Any] = None
#: The CUDA-on-CPU function mode while active (machines without a GPU).
function_mode: Optional[Any] = None


def active_mesh() -> Any:
    return _mesh_stack[-1] if _mesh_stack else None


def push_mesh(mesh: Any) -> None:
    _mesh_stack.append(mesh)


def pop_mesh() -> None:
    _mesh_stack.pop()


def any_active() -> bool:
    return bool(_mesh_stack)


@contextlib.contextmanager
def local() -> Iterator[None]:
    """Plain local torch inside an active mesh (the frontend's own work)."""
    with contextlib.ExitStack() as stack:
        if capture is not None and _get_current_dispatch_mode() is capture:
            stack.enter_context(_pop_dispatch_mode())
        if function_mode is not None and \
                torch.overrides._get_current_function_mode() is function_mode:
            stack.enter_context(torch.overrides._pop_mode_temporarily())
        yield


def internal(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Runs ``fn`` under :func:`local`: frontend entry points that do their
    own torch work on fake tensors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with local():
            return fn(*args, **kwargs)

    return wrapper
