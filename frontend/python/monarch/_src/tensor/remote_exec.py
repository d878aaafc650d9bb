"""The worker half of ``monarch.remote`` and of the ``rref`` adverb.

A ``call_function`` instruction names a remote function as
``python:<module>:<qualname>``, or ``python:@<digest>:<qualname>`` for a
function sent by value (its cloudpickle in the instruction's ``definition``),
and ``python-meta:...`` for the probe of ``propagate="cached"``. Both
tensor-worker kinds run it here: the Python tensor worker through the
resolver its extension installs in the executor's function registry
(frontend/csrc/TensorWorker.cpp), the in-process simulation (``sim``)
directly. A ``call_actor`` instruction (``rref``) runs an endpoint of this
process's actor (:func:`call_actor`), or, from a native tensor worker, of the
rank's actor in its own process (:func:`serve_actor_call`). Arguments arrive converted (distributed
tensors as the rank's local shards); the function returns a tensor or a
tuple/list of them.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable, List, Tuple

import torch

# The resolver is torch-free: the actors that run remote functions' adverbs use it too.
from .remote_actor import resolve  # noqa: F401 (remote.py finds it here)

PREFIX = "python:"
META_PREFIX = "python-meta:"

# dtype codes of the metadata probe (kept in step with remote.py).
DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
]


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
    from ..actor import worker  # the actor runtime: not imported to trace

    return _run_endpoint(worker.local_actor(mesh), mesh, endpoint, args)


def _run_endpoint(instance: Any, mesh: str, endpoint: str,
                  args: List[Any]) -> List[torch.Tensor]:
    meta = endpoint.startswith(META_PREFIX)
    name = endpoint[len(META_PREFIX):] if meta else endpoint
    from ..actor import worker
    from ..actor.actor import endpoint_function

    out = worker.run_in(instance, endpoint_function(type(instance), name), *args)
    single, tensors = flatten(out, f"endpoint {mesh}.{name}")
    return [encode_meta(single, tensors)] if meta else tensors


def serve_actor_call(instance: Any, frames: List[Any],
                     fatal: Callable[[str], None]) -> List[bytes]:
    """The rref adverb on a native tensor worker, in the actor's own process
    (the actor's internal ``__monarch_rref__`` call, worker.py): frames[0] is
    a plan ``ActorCallRequest`` from the rank's worker (runtime/tensor/lib/
    worker/RemoteActorBridge.h); the reply is one ``ActorCallReply`` frame. An
    endpoint's exception is the reply's error; a BaseException that is not an
    Exception also stops the actor (``fatal``), as it would from any adverb."""
    from ..backend.plan import plan
    from .values import from_tensor_data, from_value, tensor_data

    info = instance.__dict__.get("_monarch_context") or {}
    mesh = str(info.get("mesh"))
    reply = plan.ActorCallReply()
    where = f"{mesh}[{info.get('rank')}]"
    try:
        request = plan.ActorCallRequest.FromString(bytes(frames[0]))
        where += "." + request.endpoint.replace(META_PREFIX, "")
        devices = iter(request.devices)

        def tensor(data: Any) -> torch.Tensor:  # onto its device type here
            t, device = from_tensor_data(data), next(devices, "cpu")
            return t.to(device) if device != "cpu" else t

        args = [from_value(v, _no_ref, tensor) for v in request.args]
        for t in _run_endpoint(instance, mesh, request.endpoint, args):
            reply.results.append(tensor_data(t))
            reply.devices.append(t.device.type)
    except Exception as e:  # noqa: BLE001 - the worker fails the instruction with it
        reply = plan.ActorCallReply(error=_endpoint_error(where, e))
    except BaseException as e:  # noqa: BLE001 - not an Exception: the actor fails
        reason = _endpoint_error(where, e)
        fatal(reason)
        reply = plan.ActorCallReply(error=reason)
    return [reply.SerializeToString()]


def _endpoint_error(where: str, e: BaseException) -> str:
    """The error first (as the Python tensor worker's bridge reports it), then
    where it was raised."""
    return (f"{type(e).__name__}: {e}\n(endpoint {where}, called by rref, raised it:\n"
            f"{traceback.format_exc().rstrip()})")


def _no_ref(ref: int) -> Any:
    raise TypeError(f"rref: a request names ref {ref}; its tensors travel as values")
