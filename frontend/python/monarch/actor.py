"""``from monarch.actor import this_host`` and friends.

Proc meshes and distributed tensors are implemented here; actors
(``Actor``, ``endpoint``, ``ProcMesh.spawn``) belong to the Python actors
work and are placeholders that raise ``NotImplementedError`` when used.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional

from ._proc_mesh import ProcMesh, spawn_procs as _spawn_procs

__all__ = ["Actor", "HostMesh", "ProcMesh", "endpoint", "this_host", "this_proc"]


class HostMesh:
    """The hosts procs are spawned on; ``this_host()`` is the local machine."""

    def __init__(self, hosts: int = 1):
        self._hosts = hosts

    def spawn_procs(
        self,
        per_host: Optional[Dict[str, int]] = None,
        *,
        backend: Optional[str] = None,
        memory_cap: Optional[int] = None,
        timeout_ms: int = 60000,
        **sizes: int,
    ) -> ProcMesh:
        """Spawns one worker process per coordinate of ``per_host``.

        ``memory_cap`` (bytes, per worker; default ``$MONARCH_WORKER_MEMORY_CAP``
        or none) caps CPU tensor memory so that programs can probe sizes;
        ``backend`` is ``"c"`` (worker processes) or ``"sim"`` (in-process).
        """
        if memory_cap is None:
            memory_cap = int(os.environ.get("MONARCH_WORKER_MEMORY_CAP", "0") or 0)
        return _spawn_procs(per_host, backend=backend, memory_cap=memory_cap,
                            timeout_ms=timeout_ms, **sizes)

    def __repr__(self) -> str:
        return f"<HostMesh hosts={self._hosts}>"


_this_host = HostMesh()


def this_host() -> HostMesh:
    return _this_host


def this_proc() -> HostMesh:
    return _this_host


class Actor:
    """Base class of actors (placeholder: see the Python actors work)."""


def endpoint(fn: Optional[Callable] = None, *, propagate: Any = None) -> Any:
    """``@endpoint`` / ``@endpoint(propagate=...)`` (placeholder)."""

    def deco(f: Callable) -> Callable:
        f._monarch_endpoint = {"propagate": propagate}  # type: ignore[attr-defined]
        return f

    return deco(fn) if fn is not None else deco
