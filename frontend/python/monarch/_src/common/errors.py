"""The frontend's error types, one of each (docs/python.md, "Errors").

Misuse is raised at the call site, before anything is sent to a worker, as a
:class:`MonarchUsageError` whose message starts with Monarch's category
(``LOCAL_TENSOR``, ``WRONG_MESH``, ...). A failure on a worker is raised at the
``get()`` of any value depending on it as a :class:`RemoteException`; an
endpoint that raised as an :class:`ActorError`; a dead or stuck process, or
an actor that failed, as a :class:`SupervisionError` naming mesh and rank.
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
    "GET_IN_COMPILED_STEP",
)


class MonarchUsageError(ValueError):
    """A misuse of distributed tensors, detected on the controller."""

    def __init__(self, category: str, message: str):
        assert category in CATEGORIES, category
        self.category = category
        super().__init__(f"{category}: {message}")


def usage(category: str, message: str) -> MonarchUsageError:
    return MonarchUsageError(category, message)


class RemoteException(RuntimeError):
    """An instruction failed on a worker; raised by ``get()`` of dependents."""

    def __init__(self, rank: int, message: str, location: str = "", instruction: int = -1):
        self.rank = rank
        self.worker_message = message
        self.location = location
        self.instruction = instruction
        where = f" (issued at {location})" if location else ""
        super().__init__(f"on rank {rank}: {message}{where}")

    def __reduce__(self):
        return (RemoteException, (self.rank, self.worker_message, self.location,
                                  self.instruction))


class SupervisionError(RuntimeError):
    """A proc or actor of a mesh failed: a process died or stopped answering,
    or an actor stopped (a broadcast raised, an unhandled supervision event).
    ``mesh`` and ``rank`` say where ("" and -1 when unknown)."""

    def __init__(self, message: str, mesh: str = "", rank: int = -1):
        self.mesh = mesh
        self.rank = rank
        self.worker_message = message
        super().__init__(message)

    @classmethod
    def worker_died(cls, rank: int, message: str, mesh: str = "") -> "SupervisionError":
        """A tensor worker's process failed (rank of the root mesh; -1: the
        controller cannot reach the workers at all)."""
        if rank >= 0:
            text = f"worker process for rank {rank} failed: {message}"
        else:
            text = f"the mesh's workers cannot be reached: {message}"
        err = cls(text, mesh, rank)
        err.worker_message = message
        return err

    def __reduce__(self):
        return (_rebuild_supervision_error, (str(self), self.mesh, self.rank,
                                             self.worker_message))


def _rebuild_supervision_error(text: str, mesh: str, rank: int,
                               worker_message: str) -> SupervisionError:
    err = SupervisionError(text, mesh, rank)
    err.worker_message = worker_message
    return err


class ActorError(Exception):
    """An endpoint raised on an actor: the remote exception (``.exception``,
    None if it did not pickle) and its traceback text (``.traceback``)."""

    def __init__(self, where: str, exception: Optional[BaseException], remote_traceback: str):
        self.where = where
        self.exception = exception
        self.traceback = remote_traceback
        super().__init__(f"actor {where} raised:\n{remote_traceback.rstrip()}")

    def __reduce__(self):
        return (ActorError, (self.where, self.exception, self.traceback))
