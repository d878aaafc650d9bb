"""The user's source line that issued an operation (``Instruction.location``).

A walk up the frames (no traceback objects) to the first one outside the
frontend, torch and the standard library; whether a code object is "inside"
is decided once per code object. About half a microsecond per call.
"""

from __future__ import annotations

import os
import sys
from types import CodeType
from typing import Dict, Optional, Tuple

def _dirs_of(path: str, up: int = 1) -> Tuple[str, ...]:
    """The directory ``up`` levels above ``path``, as given and resolved
    (the build stages the package as symlinks to the sources)."""
    out = set()
    for p in (os.path.abspath(path), os.path.realpath(path)):
        for _ in range(up):
            p = os.path.dirname(p)
        out.add(p + os.sep)
    return tuple(out)


# .../monarch/_src/common/location.py -> .../monarch/
_skip_prefixes: Tuple[str, ...] = _dirs_of(__file__, 3) + _dirs_of(os.__file__)
_with_torch = False
_inside: Dict[CodeType, bool] = {}


def _refresh() -> None:
    """Adds torch's directory once torch is imported (this module is imported
    by processes that never import torch)."""
    global _skip_prefixes, _with_torch
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        _skip_prefixes = _skip_prefixes + _dirs_of(torch.__file__)
        _with_torch = True
        _inside.clear()


def _is_inside(code: CodeType) -> bool:
    hit = _inside.get(code)
    if hit is None:
        filename = code.co_filename
        hit = filename.startswith(_skip_prefixes) or filename.startswith("<frozen")
        _inside[code] = hit
    return hit


def user_frame() -> Tuple[Optional[CodeType], int]:
    """(code object, line) of the innermost frame outside monarch, torch and
    the standard library ((None, 0) when there is none): what
    :func:`user_location` formats, without formatting it."""
    if not _with_torch and "torch" in sys.modules:
        _refresh()
    f = sys._getframe(1)
    inside = _inside.get  # inline: called for every op dispatched
    while f is not None:
        code = f.f_code
        hit = inside(code)
        if hit is None:
            hit = _is_inside(code)
        if not hit:
            return code, f.f_lineno
        f = f.f_back
    return None, 0


def user_location() -> str:
    """``file:line`` of the innermost frame outside monarch, torch and the
    standard library ("" when there is none)."""
    if not _with_torch and "torch" in sys.modules:
        _refresh()
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if not _is_inside(code):
            return f"{code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return ""
