"""Which mesh is active and which torch modes capture calls.

``mesh.activate()`` (``dispatch.activate``) pushes the mesh and, for the
outermost activation, enters the capture mode -- a ``TorchDispatchMode``
that turns every ATen call into an operation on the mesh (on a machine
without a GPU, ``device="cuda"`` gets through as ``devices`` says). The frontend's own torch work inside an active
mesh (fake tensors, the in-process simulation) runs under :func:`local`.

torch 1.x keeps its mode stacks in Python: each call into a mode goes
through a contextmanager that pops and pushes it (2-4 us an op on the
development machine). There, when no other dispatch mode is active,
:func:`enter_dispatch` installs the capture mode straight into the C++ slot
the stack would use -- the C++ dispatcher disables a mode while its handler
runs, so this is what the stack does, less the Python around it; :func:`local`
takes it out and puts it back, except inside the handler, where the
dispatcher already did. torch 2.x keeps the stacks in C++: there modes are entered as usual.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator, List, Optional

import torch
import torch.utils._python_dispatch as _python_dispatch
from torch.utils._python_dispatch import _get_current_dispatch_mode
from torch.utils._python_dispatch import _pop_mode_temporarily as _pop_dispatch_mode

#: torch 1.x: mode stacks in Python (see the module docstring).
LEGACY_MODE_STACKS = hasattr(_python_dispatch, "_TorchDispatchStackMode")

_mesh_stack: List[Any] = []
#: The capture mode while some mesh is active (dispatch.CaptureMode).
capture: Optional[Any] = None


def active_mesh() -> Any:
    return _mesh_stack[-1] if _mesh_stack else None


def push_mesh(mesh: Any) -> None:
    _mesh_stack.append(mesh)


def pop_mesh() -> None:
    _mesh_stack.pop()


def any_active() -> bool:
    """Some mesh is active (``no_mesh.activate()`` pushes None: none is)."""
    return active_mesh() is not None


class _Thread(threading.local):
    #: Modes this thread installed in the C++ slots (legacy stacks).
    direct_dispatch: Optional[Any] = None
    #: >0 while the capture mode's handler runs on this thread.
    in_handler = 0
    #: >0 inside local().
    local_depth = 0


_thread = _Thread()


def enter_dispatch(mode: Any) -> bool:
    """Enters a TorchDispatchMode; True when installed directly."""
    if LEGACY_MODE_STACKS and _python_dispatch._len_torch_dispatch_stack() == 0:
        torch._C._set_torch_dispatch_mode(mode)
        _thread.direct_dispatch = mode
        return True
    mode.__enter__()
    return False


def exit_dispatch(mode: Any, direct: bool) -> None:
    if direct:
        _thread.direct_dispatch = None
        torch._C._set_torch_dispatch_mode(None)
    else:
        mode.__exit__(None, None, None)


class handling:
    """``with handling():`` around the capture mode's handler (legacy
    stacks: the dispatcher has disabled the mode meanwhile)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _thread.in_handler += 1

    def __exit__(self, *exc: Any) -> None:
        _thread.in_handler -= 1


@contextlib.contextmanager
def local() -> Iterator[None]:
    """Plain local torch inside an active mesh (the frontend's own work).
    Re-entrant: only the outermost takes the modes out and puts them back."""
    t = _thread
    if t.local_depth:
        yield
        return
    t.local_depth += 1
    try:
        with contextlib.ExitStack() as stack:
            direct = t.direct_dispatch
            if direct is not None and not t.in_handler:
                # Inside the handler the dispatcher has disabled it already.
                torch._C._set_torch_dispatch_mode(None)
                stack.callback(torch._C._set_torch_dispatch_mode, direct)
            elif capture is not None and _get_current_dispatch_mode() is capture:
                stack.enter_context(_pop_dispatch_mode())
            yield
    finally:
        t.local_depth -= 1


def internal(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Runs ``fn`` under :func:`local`: frontend entry points that do their
    own torch work on fake tensors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with local():
            return fn(*args, **kwargs)

    return wrapper
