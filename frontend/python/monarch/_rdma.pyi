"""monarch._rdma: RDMA buffers (frontend/csrc/Rdma.cpp, runtime/rdma)."""

from typing import Any, Dict, Optional, Sequence, Tuple

# (ok, message, error kind)
Result = Tuple[bool, str, str]

class Transfer:
    def get(self, timeout_ms: int) -> Optional[Result]: ...
    def ready(self) -> bool: ...

class OwnedBuffer:
    def handle(self) -> bytes: ...
    def drop(self) -> None: ...

def register(addr: int, size: int, writable: bool, keep: Any, device: int = 0) -> OwnedBuffer:
    """``device``: nonzero when ``addr`` is the host copy of that CUDA memory."""
def buffer_address(obj: Any) -> Tuple[int, int, bool]:
    """(address, bytes, read_only) of a buffer-protocol object."""
def submit(ops: Sequence[Tuple[str, bytes, int, int, int, Any]]) -> Transfer:
    """[(kind "read"|"write", handle, offset, address, size, keep-alive), ...]."""
def drop_remote(handle: bytes) -> Transfer: ...
def is_local(handle: bytes) -> bool: ...
def handle_info(handle: bytes) -> Dict[str, Any]: ...
def backend() -> str:
    """"ibverbs", "tcp" or "none"."""
