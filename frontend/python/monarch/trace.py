"""``python -m monarch.trace script.py [-o out.mlir] [--verify] [args...]``
(the CLI is ``monarch._src.tensor.trace_cli``).

Importing this module keeps ``monarch.trace(fn, *args)`` callable: the
submodule takes the name of the function ``monarch.trace`` once imported.
"""

from __future__ import annotations

import sys
import types

from ._src.tensor.trace_api import trace as _trace_fn
from ._src.tensor.trace_cli import main

__all__ = ["main"]


class _CallableModule(types.ModuleType):
    def __call__(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        return _trace_fn(fn, *args, **kwargs)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
