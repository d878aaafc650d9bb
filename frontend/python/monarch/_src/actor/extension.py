"""``monarch._actors``, the C++ actor runtime's extension, with a clear error
when the build did not make it."""

from __future__ import annotations

import os
import sys
from typing import Any

_ext: Any = None


def actors() -> Any:
    global _ext
    if _ext is None:
        try:
            from monarch import _actors  # type: ignore[attr-defined]
        except ImportError as e:
            here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            raise ImportError(
                f"monarch._actors (Python actors on the C++ runtime) is not built in the "
                f"monarch package at {here}: build it with cmake (docs/building.md; it needs "
                f"pybind11 and the development headers of this Python, {sys.executable}) and "
                f"run with PYTHONPATH=build/python ({e})") from None
        _ext = _actors
    return _ext
