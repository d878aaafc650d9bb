"""The worker half of ``monarch.remote``: running a Python function by name.

A ``call_function`` instruction names a remote function as
``python:<module>:<qualname>`` (or ``python-meta:...``, the probe of
``propagate="cached"``). Both tensor-worker kinds run it here: the Python
tensor worker through the resolver its extension installs in the executor's
function registry (frontend/csrc/TensorWorker.cpp), the in-process simulation
(``_sim``) directly. Arguments arrive converted (distributed tensors as the
rank's local shards); the function returns a tensor or a tuple/list of them.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

PREFIX = "python:"
META_PREFIX = "python-meta:"

_functions: Dict[str, Callable[..., Any]] = {}

# dtype codes of the metadata probe (kept in step with _remote.py).
DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
]


_main_module: Optional[types.ModuleType] = None


def _load_main() -> types.ModuleType:
    """The controller's ``__main__``: in the controller (the sim backend) the
    module itself; in a worker its script (path in $MONARCH_MAIN_FILE) run
    once as ``__mp_main__`` -- so its ``if __name__ == "__main__":`` block does
    not run -- unless an actor spawn already shipped and ran it."""
    global _main_module
    if not os.environ.get("MONARCH_WORKER_KIND"):
        return sys.modules["__main__"]
    worker = sys.modules.get("monarch._worker")
    if worker is not None and getattr(worker, "_main_loaded", None):
        return sys.modules["__main__"]
    if _main_module is None:
        path = os.environ.get("MONARCH_MAIN_FILE", "")
        if not path:
            raise RuntimeError("the function is defined in the controller's __main__, "
                               "which this worker cannot see")
        mod = types.ModuleType("__mp_main__")
        mod.__file__ = path
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), mod.__dict__)
        # multiprocessing aliases __mp_main__ to the worker's own __main__;
        # both names now mean the controller's, as for shipped actor classes.
        sys.modules["__mp_main__"] = mod
        sys.modules["__main__"] = mod
        _main_module = mod
    return _main_module


def resolve(name: str) -> Callable[..., Any]:
    fn = _functions.get(name)
    if fn is not None:
        return fn
    _, module, qualname = name.split(":", 2)
    obj: Any = _load_main() if module == "__main__" else importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    fn = getattr(obj, "_monarch_remote_fn", obj)  # a Remote: its function
    _functions[name] = fn
    return fn


def _flatten(out: Any, what: str) -> Tuple[bool, List[torch.Tensor]]:
    if isinstance(out, torch.Tensor):
        return True, [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return False, list(out)
    raise TypeError(f"remote function {what} must return a tensor or a tuple/list of "
                    f"tensors, not {type(out).__name__}")


def encode_meta(single: bool, tensors: List[torch.Tensor]) -> torch.Tensor:
    """[-1 (one tensor) or count, then per tensor: dtype code, ndim, sizes...]."""
    out = [-1 if single else len(tensors)]
    for t in tensors:
        out += [DTYPES.index(t.dtype), t.dim(), *t.shape]
    return torch.tensor(out, dtype=torch.int64)


def call(name: str, args: List[Any]) -> List[torch.Tensor]:
    """Runs the function named by a call_function instruction on this rank."""
    meta = name.startswith(META_PREFIX)
    fn = resolve(PREFIX + name[len(META_PREFIX):] if meta else name)
    out = fn(*args)
    single, tensors = _flatten(out, name.split(":", 1)[1])
    if meta:
        return [encode_meta(single, tensors)]
    return tensors
