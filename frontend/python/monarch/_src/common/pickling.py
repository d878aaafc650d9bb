"""Pickling of values that travel to actors and workers (Monarch's rule).

Everything is pickled with cloudpickle, protocol 5: classes and functions of
the controller's ``__main__``, and those defined inside functions or as
lambdas, travel **by value** -- so a script written as Monarch's examples
write it (top-level code, no ``if __name__ == "__main__":`` guard) works, and
workers never re-run the controller's script. Everything importable travels
by reference, as plain pickle does.

CPU tensors of at least :data:`TENSOR_FRAME_MIN` bytes are reduced to an
out-of-band buffer: each buffer is one raw frame on the wire beside the
pickle (a ``Blob``), never copied into it. ``dumps`` returns
``[pickle, buffers...]``; ``loads`` takes the same list.

This module imports neither torch (it looks for it in ``sys.modules``: a
process that never imported torch has no tensors to send) nor the tensor
frontend: actor workers import it.
"""

from __future__ import annotations

import io
import pickle
import sys
from typing import Any, List, Sequence, Tuple

try:
    import cloudpickle
except ImportError as e:  # pragma: no cover - a packaging error
    raise ImportError(
        "monarch needs cloudpickle to send classes and functions of the controller's "
        "__main__ to workers (Debian: python3-cloudpickle; pip: cloudpickle)") from e

TENSOR_FRAME_MIN = 64 * 1024  # tensors at least this big travel as raw frames


def _rebuild_tensor(buf: Any, dtype: Any, shape: Tuple[int, ...]) -> Any:
    import torch

    flat = torch.frombuffer(bytearray(buf), dtype=torch.uint8)
    return flat.view(dtype).reshape(shape)


class _Pickler(cloudpickle.CloudPickler):
    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None and type(obj) is torch.Tensor:
            t = obj
            if (t.device.type == "cpu" and t.layout == torch.strided and not t.requires_grad
                    and t.numel() * t.element_size() >= TENSOR_FRAME_MIN):
                raw = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
                return _rebuild_tensor, (pickle.PickleBuffer(raw), t.dtype, tuple(t.shape))
        return super().reducer_override(obj)


# Values made only of these (in small tuples, lists and str-keyed dicts)
# pickle the same with the C pickler as with cloudpickle, at a third of the
# cost: most messages (endpoint arguments, replies) are such values.
_ATOMS = frozenset((str, int, float, bool, type(None), bytes))
_PLAIN_DEPTH = 3
_PLAIN_LEN = 16


def _plain(obj: Any, depth: int) -> bool:
    t = type(obj)
    if t in _ATOMS:
        return True
    if depth == 0:
        return False
    if t is tuple or t is list:
        if len(obj) > _PLAIN_LEN:
            return False
        for x in obj:
            if not _plain(x, depth - 1):
                return False
        return True
    if t is dict:
        if len(obj) > _PLAIN_LEN:
            return False
        for k, v in obj.items():
            if type(k) is not str or not _plain(v, depth - 1):
                return False
        return True
    return False


def dumps(obj: Any) -> List[Any]:
    """[pickle, out-of-band buffers...]: each becomes one frame."""
    if _plain(obj, _PLAIN_DEPTH):
        return [pickle.dumps(obj, protocol=5)]
    buffers: List[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return [out.getbuffer()] + [b.raw() for b in buffers]


def dumps_bytes(obj: Any) -> bytes:
    """One self-contained pickle (no out-of-band buffers)."""
    out = io.BytesIO()
    cloudpickle.CloudPickler(out, protocol=5).dump(obj)
    return out.getvalue()


def loads(frames: Sequence[Any]) -> Any:
    return pickle.loads(memoryview(frames[0]), buffers=[memoryview(f) for f in frames[1:]])


def by_reference(obj: Any) -> bool:
    """Whether a worker can import ``obj`` (a class or function) by its module
    and qualified name; otherwise it must travel by value."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", "")
    if not module or module in ("__main__", "__mp_main__") or not qualname:
        return False
    if "<locals>" in qualname or "<lambda>" in qualname:
        return False
    mod = sys.modules.get(module)
    if mod is None:
        return False
    target: Any = mod
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            return False
    return target is obj or getattr(target, "_monarch_remote_fn", None) is obj
