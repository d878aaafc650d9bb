"""The user's source line that issued an operation (Instruction.location)."""

from __future__ import annotations

import os
import sys

import torch

_SKIP = tuple(
    sorted(
        {
            os.path.dirname(f(path)) + os.sep
            for path in (__file__, torch.__file__, os.__file__)
            for f in (os.path.abspath, os.path.realpath)
        }
    )
)


def user_location() -> str:
    f = sys._getframe(1)
    while f is not None:
        filename = f.f_code.co_filename
        if not filename.startswith(_SKIP) and not filename.startswith("<frozen"):
            return f"{filename}:{f.f_lineno}"
        f = f.f_back
    return ""
