"""The running actor's context: which actor, where in its mesh.

Set by the worker around every constructor, endpoint and ``__supervise__``
call (contextvars, so an endpoint's asyncio tasks see it too). Monarch's API
over it -- ``context()``, ``current_rank()``, ... -- is in ``current.py``.
"""

from __future__ import annotations

import contextvars
from typing import Any, Dict, Optional

_current: contextvars.ContextVar[Optional[Dict[str, Any]]] = contextvars.ContextVar(
    "monarch_actor_context", default=None
)
_current_instance: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "monarch_actor_instance", default=None
)


def current_context() -> Optional[Dict[str, Any]]:
    """{"mesh", "rank", "point", "sizes", "proc_rank", "owner_port"} of the
    running actor, or None outside actors."""
    return _current.get()


def current_instance() -> Any:
    """The actor whose constructor or endpoint runs in this context (the owner
    of the proc and actor meshes it spawns), or None."""
    return _current_instance.get()


def in_actor() -> bool:
    return _current.get() is not None


class entered:
    """``with entered(instance, info):`` runs code as that actor."""

    __slots__ = ("_instance", "_info", "_tokens")

    def __init__(self, instance: Any, info: Dict[str, Any]):
        self._instance = instance
        self._info = info

    def __enter__(self) -> None:
        self._tokens = (_current.set(self._info), _current_instance.set(self._instance))

    def __exit__(self, *exc: Any) -> None:
        _current_instance.reset(self._tokens[1])
        _current.reset(self._tokens[0])
