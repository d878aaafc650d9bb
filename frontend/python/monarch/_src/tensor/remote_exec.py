"""The worker half of ``monarch.remote`` and of the ``rref`` adverb.

A ``call_function`` instruction names a remote function as
``python:<module>:<qualname>``, or ``python:@<digest>:<qualname>`` for a
function sent by value (its cloudpickle in the instruction's ``definition``),
and ``python-meta:...`` for the probe of ``propagate="cached"``. Both
tensor-worker kinds run it here: the Python tensor worker through the
resolver its extension installs in the executor's function registry
(frontend/csrc/TensorWorker.cpp), the in-process simulation (``sim``)
directly. A ``call_actor`` instruction (``rref``) runs an endpoint of this
process's actor (:func:`call_actor`). Arguments arrive converted (distributed
tensors as the rank's local shards); the function returns a tensor or a
tuple/list of them.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Tuple

import torch


PREFIX = "python:"
META_PREFIX = "python-meta:"

_functions: Dict[str, Callable[..., Any]] = {}

# dtype codes of the metadata probe (kept in step with remote.py).
DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
]


def resolve(name: str, definition: bytes = b"") -> Callable[..., Any]:
    """The function a ``call_function`` names: ``python:<module>:<qualname>``
    is imported; ``python:@<digest>:<qualname>`` is unpickled from the
    by-value ``definition`` the instruction carried (once per process)."""
    fn = _functions.get(name)
    if fn is not None:
        return fn
    _, module, qualname = name.split(":", 2)
    if module.startswith("@"):
        if not definition:
            raise RuntimeError(f"remote function {qualname} was sent by value but this worker "
                               "never received its definition")
        import pickle

        fn = pickle.loads(definition)
    else:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        fn = obj
    fn = getattr(fn, "_monarch_remote_fn", fn)  # a Remote: its function
    _functions[name] = fn
    return fn


def flatten(out: Any, what: str) -> Tuple[bool, List[torch.Tensor]]:
    if out is None:  # run for its effects (Monarch's propagate="inspect")
        return False, []
    if isinstance(out, torch.Tensor):
        return True, [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return False, list(out)
    raise TypeError(f"remote function {what} must return a tensor, a tuple/list of "
                    f"tensors or None, not {type(out).__name__}")


def encode_meta(single: bool, tensors: List[torch.Tensor]) -> torch.Tensor:
    """[-1 (one tensor) or count, then per tensor: dtype code, device code
    (0 CPU, 1 CUDA), ndim, sizes...]."""
    out = [-1 if single else len(tensors)]
    for t in tensors:
        out += [DTYPES.index(t.dtype), 1 if t.device.type == "cuda" else 0, t.dim(), *t.shape]
    return torch.tensor(out, dtype=torch.int64)


def call(name: str, args: List[Any], definition: bytes = b"") -> List[torch.Tensor]:
    """Runs the function named by a call_function instruction on this rank."""
    meta = name.startswith(META_PREFIX)
    fn = resolve(PREFIX + name[len(META_PREFIX):] if meta else name, definition)
    out = fn(*args)
    single, tensors = flatten(out, name.split(":", 1)[1])
    if meta:
        return [encode_meta(single, tensors)]
    return tensors


def call_actor(mesh: str, endpoint: str, args: List[Any]) -> List[torch.Tensor]:
    """The rref adverb on a Python tensor worker: the executor calls the
    endpoint of this process's actor of ``mesh`` with the local shards (on its
    stream thread); the tensors returned become the results' shards."""
    meta = endpoint.startswith(META_PREFIX)
    name = endpoint[len(META_PREFIX):] if meta else endpoint
    from ..actor import worker  # the actor runtime: not imported to trace
    from ..actor.actor import endpoint_function

    instance = worker.local_actor(mesh)
    out = worker.run_in(instance, endpoint_function(type(instance), name), *args)
    single, tensors = flatten(out, f"endpoint {mesh}.{name}")
    return [encode_meta(single, tensors)] if meta else tensors
