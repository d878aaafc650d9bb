"""Error types of the frontend.

Misuse is raised at the call site, before anything is sent to a worker, as a
:class:`MonarchUsageError` whose message starts with Monarch's category
(``LOCAL_TENSOR``, ``WRONG_MESH``, ``WRONG_STREAM``, ``BORROWED``, ``DROPPED``,
``MUTATING_BORROW``, ``REQUIRES_GRAD``). A failure on a worker is raised at the
``get()`` of any value depending on it as a :class:`RemoteException`.
"""

from __future__ import annotations

from typing import Optional

CATEGORIES = (
    "LOCAL_TENSOR",
    "WRONG_MESH",
    "WRONG_STREAM",
    "BORROWED",
    "DROPPED",
    "MUTATING_BORROW",
    "REQUIRES_GRAD",
)


class MonarchUsageError(ValueError):
    """A misuse of distributed tensors, detected on the controller."""

    def __init__(self, category: str, message: str):
        assert category in CATEGORIES, category
        self.category = category
        super().__init__(f"{category}: {message}")


class RemoteException(RuntimeError):
    """An instruction failed on a worker; raised by ``get()`` of dependents."""

    def __init__(
        self,
        rank: int,
        message: str,
        location: str = "",
        instruction: int = -1,
    ):
        self.rank = rank
        self.worker_message = message
        self.location = location
        self.instruction = instruction
        where = f" (issued at {location})" if location else ""
        super().__init__(f"on rank {rank}: {message}{where}")


class SupervisionError(RuntimeError):
    """A worker process of the mesh died."""

    def __init__(self, rank: int, message: str):
        self.rank = rank
        self.worker_message = message
        if rank >= 0:
            super().__init__(f"worker process for rank {rank} failed: {message}")
        else:
            super().__init__(f"the mesh's workers cannot be reached: {message}")


def usage(category: str, message: str) -> MonarchUsageError:
    return MonarchUsageError(category, message)


def location_suffix(location: Optional[str]) -> str:
    return f" at {location}" if location else ""
