"""One-sided reads and writes of registered memory (docs/rdma.md).

    from monarch.rdma import RDMABuffer

    class Owner(Actor):
        def __init__(self):
            self.weights = torch.arange(1024, dtype=torch.float32)
            self.buffer = RDMABuffer(self.weights)   # registered here

        @endpoint
        def handle(self) -> RDMABuffer:
            return self.buffer                     # pickles as a small handle

    buf = owner.handle.call_one().get()
    dst = torch.empty(1024)
    buf.read_into(dst).get()                       # owner -> dst
    buf.write_from(torch.zeros(512), offset=2048).get()

Memory is one contiguous 1-D range: a 1-D contiguous CPU or CUDA tensor or a
writable buffer (bytearray, memoryview, numpy array); ``bytes`` register
read-only. Non-contiguous or multi-dimensional tensors, other devices and
empty memory are refused with an error. ``offset`` counts bytes.

CUDA memory goes through host copies (docs/rdma.md, "CUDA memory"): a buffer
over a CUDA tensor is registered through a pinned host copy that its owner
refreshes for each read and writes through for each write (served by the TCP
transport); a CUDA ``dst`` of ``read_into`` is filled when its Future
completes, a CUDA ``src`` of ``write_from`` is copied to the host when the
call is made. The copies are ordered after the work torch queued on the
device's default stream.

Transfers go through an RDMA NIC (libibverbs) when both procs have one, else
over the runtime's TCP/Unix transport; :func:`backend` says which this process
uses (``"ibverbs"``, ``"tcp"`` or ``"none"``).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

from monarch import _rdma  # type: ignore[attr-defined]

from ..common.future import Future, HandleSource

__all__ = ["RDMABuffer", "RDMAError", "backend", "submit"]


class RDMAError(RuntimeError):
    """A refused or failed RDMA operation; ``code`` is the runtime's error
    kind (``"NotFound"`` for a dropped buffer, ``"Closed"`` for an owner that
    went away, ``"Timeout"``, ``"Invalid"``...)."""

    def __init__(self, message: str, code: str = "Internal"):
        super().__init__(message)
        self.code = code


def backend() -> str:
    """``"ibverbs"``, ``"tcp"`` or ``"none"`` (MONARCH_RDMA_BACKEND=none)."""
    return _rdma.backend()


def get_rdma_backend() -> str:
    """Monarch's name for :func:`backend`."""
    return backend()


def is_rdma_available() -> bool:
    """Whether buffers can be read and written here (by ibverbs or the TCP
    fallback); False when MONARCH_RDMA_BACKEND=none."""
    return backend() != "none"


def is_ibverbs_available() -> bool:
    """Whether transfers go through an RDMA device (ibverbs), not TCP."""
    return backend() == "ibverbs"


def _is_cuda(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.Tensor) and obj.device.type == "cuda"


def _check_layout(obj: Any) -> None:
    if obj.dim() != 1:
        raise RDMAError(f"RDMA needs a 1-D tensor, got shape {tuple(obj.shape)} "
                        "(use .view(-1) on a contiguous tensor)", "Invalid")
    if not obj.is_contiguous():
        raise RDMAError("RDMA needs a contiguous tensor (use .contiguous())", "Invalid")


def _host_copy(nbytes: int) -> Any:
    """Pinned host memory: copies to and from the GPU at full speed."""
    import torch

    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)


def _local(obj: Any, *, for_write: bool) -> Tuple[int, int, Any, Optional[Callable[[], None]]]:
    """(address, bytes, keep, after) of a transfer's local side. A CUDA
    tensor is staged through host memory: a write's source copied there now,
    a read's destination filled from there once the transfer is done
    (``after``)."""
    if not _is_cuda(obj):
        addr, size, _ = _memory(obj, for_write=for_write)
        return addr, size, obj, None
    import torch

    _check_layout(obj)
    device_bytes = obj.view(torch.uint8)
    if not for_write:
        host = device_bytes.cpu()  # synchronous: src as it is now
        return host.data_ptr(), host.numel(), host, None
    host = _host_copy(device_bytes.numel())
    return host.data_ptr(), host.numel(), host, lambda: device_bytes.copy_(host)


def _memory(obj: Any, *, for_write: bool) -> Tuple[int, int, bool]:
    """(address, bytes, read_only) of host memory (a CPU tensor or a
    buffer), or a clear error."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.device.type != "cpu":
            raise RDMAError(
                f"RDMA of {obj.device.type} tensors is not supported: memory is a CPU "
                "or CUDA tensor or a buffer (docs/rdma.md)",
                "Invalid",
            )
        _check_layout(obj)
        if obj.numel() and not obj.data_ptr():
            raise RDMAError(
                f"RDMA needs a tensor with host memory; this {type(obj).__name__} has no "
                "storage here (a distributed tensor's values live on its workers: register "
                "a local tensor in the proc that holds it)", "Invalid")
        return obj.data_ptr(), obj.numel() * obj.element_size(), False
    try:
        addr, size, read_only = _rdma.buffer_address(obj)
    except TypeError:
        raise RDMAError(
            f"RDMA needs a torch.Tensor or a buffer (bytearray, memoryview), "
            f"not {type(obj).__name__}",
            "Invalid",
        ) from None
    if for_write and read_only:
        raise RDMAError("cannot read into read-only memory", "Invalid")
    return addr, size, read_only


_MAX_OFFSET = 2**64 - 1


def _offset(offset: Any) -> int:
    """A transfer's byte offset: an int in [0, 2**64)."""
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise RDMAError(f"RDMA offset must be a non-negative int (bytes), got "
                        f"{type(offset).__name__}", "Invalid")
    if offset < 0:
        raise RDMAError(f"RDMA offset must be a non-negative int (bytes), got {offset}",
                        "Invalid")
    if offset > _MAX_OFFSET:
        raise RDMAError(f"RDMA offset {offset} exceeds the largest there is (2**64 - 1)",
                        "Invalid")
    return offset


def _check(result: Any) -> None:
    ok, message, code = result
    if not ok:
        raise RDMAError(message, code)


def _transfer_future(transfer: Any, after: Sequence[Optional[Callable[[], None]]] = ()
                     ) -> Future:
    """The Future of a submitted transfer; ``after`` (the staged CUDA
    destinations' copies) run when it has succeeded."""
    then = [a for a in after if a is not None]

    def done(result: Any) -> None:
        _check(result)
        for copy in then:
            copy()

    return Future(HandleSource(transfer, done))


class RDMABuffer:
    """Registered memory: made on the owning proc from a tensor or buffer;
    anywhere else (after pickling) a handle naming it."""

    def __init__(self, data: Any):
        device, keep = 0, data
        if _is_cuda(data):
            # Through a host copy its owner keeps current (module docstring).
            _check_layout(data)
            host = _host_copy(data.numel() * data.element_size())
            addr, size, read_only = host.data_ptr(), host.numel(), False
            device, keep = data.data_ptr(), (data, host)
        else:
            addr, size, read_only = _memory(data, for_write=False)
        if size == 0:
            raise RDMAError("cannot register empty memory", "Invalid")
        self._owned = _rdma.register(addr, size, not read_only, keep, device)
        self._handle: bytes = self._owned.handle()

    @classmethod
    def _from_handle(cls, handle: bytes) -> "RDMABuffer":
        self = cls.__new__(cls)
        self._owned = None
        self._handle = handle
        return self

    def __reduce__(self):
        return (RDMABuffer._from_handle, (self._handle,))

    @property
    def size(self) -> int:
        """Bytes registered."""
        return int(_rdma.handle_info(self._handle)["size"])

    def read_into(self, dst: Any, offset: int = 0) -> Future:
        """Copies ``len(dst)`` bytes of this buffer, from byte ``offset``, into
        ``dst``; the Future's ``get(timeout)`` raises :class:`RDMAError` on
        failure."""
        addr, size, keep, after = _local(dst, for_write=True)
        return _transfer_future(_rdma.submit([("read", self._handle, _offset(offset), addr, size,
                                               keep)]), [after])

    def write_from(self, src: Any, offset: int = 0) -> Future:
        """Copies all of ``src`` into this buffer at byte ``offset``."""
        addr, size, keep, _ = _local(src, for_write=False)
        return _transfer_future(_rdma.submit([("write", self._handle, _offset(offset), addr, size,
                                               keep)]))

    def drop(self) -> None:
        """Unregisters the memory (on its owner, from wherever this handle
        is); later transfers fail with ``code == "NotFound"``."""
        if self._owned is not None:
            self._owned.drop()
            return
        _check(_rdma.drop_remote(self._handle).get(60_000) or (False, "drop timed out", "Timeout"))

    def __repr__(self) -> str:
        info = _rdma.handle_info(self._handle)
        where = "owned here" if self._owned is not None else f"on {info['owner']}"
        return f"<RDMABuffer {info['size']} bytes, {where}>"


def submit(ops: Sequence[Tuple[str, RDMABuffer, Any, int]]) -> Future:
    """Several transfers at once: ``[("read", buffer, dst, offset),
    ("write", buffer, src, offset), ...]``; one Future for all (the first
    error wins)."""
    if isinstance(ops, (str, bytes)) or not hasattr(ops, "__iter__"):
        raise TypeError(f"submit takes a list of (kind, buffer, memory, offset) tuples, got "
                        f"{type(ops).__name__}")
    batch: List[tuple] = []
    after: List[Optional[Callable[[], None]]] = []
    for i, op in enumerate(ops):
        if not isinstance(op, (tuple, list)) or len(op) != 4:
            what = (f"a {type(op).__name__} of {len(op)}" if isinstance(op, (tuple, list))
                    else f"{type(op).__name__}")
            raise TypeError(f"submit: op {i} must be (kind, buffer, memory, offset), got {what}")
        kind, buf, local, offset = op
        if not isinstance(buf, RDMABuffer):
            raise TypeError(f"submit: the buffer of op {i} must be an RDMABuffer, got "
                            f"{type(buf).__name__}")
        addr, size, keep, then = _local(local, for_write=kind == "read")
        batch.append((kind, buf._handle, _offset(offset), addr, size, keep))
        after.append(then)
    return _transfer_future(_rdma.submit(batch), after)
