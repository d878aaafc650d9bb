"""Monarch's view of the running actor: ``context()``, ``current_rank()``,
``current_size()``, ``current_actor_name()`` (docs/python.md, "Monarch
compatibility").

Everything here is read from the context the worker sets around each
constructor, endpoint and ``__supervise__`` call (``context.py``). Outside an
actor -- in the controller -- it describes the root client, as in Monarch:
``current_rank()`` is a point without dimensions and
``str(context().actor_instance)`` is ``"<root>"``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from . import context as _context
from .shape import Extent, Point

__all__ = ["ActorId", "Context", "Instance", "context", "current_actor_name",
           "current_rank", "current_size"]

_NO_DIMS = Extent([], [])


class ActorId:
    """Which actor: ``actor_name`` (the mesh name given to ``spawn``),
    ``rank`` (its index in that mesh) and ``proc_id``. ``str()`` is
    ``"<proc_id>/<actor_name>[<rank>]"``, the runtime's actor address."""

    __slots__ = ("actor_name", "rank", "proc_id")

    def __init__(self, actor_name: str, rank: int, proc_id: str):
        self.actor_name = actor_name
        self.rank = rank
        self.proc_id = proc_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorId) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __str__(self) -> str:
        return f"{self.proc_id}/{self.actor_name}[{self.rank}]"

    def __repr__(self) -> str:
        return f"ActorId({str(self)!r})"


class Instance:
    """The running actor (Monarch's ``context().actor_instance``): ``rank`` (a
    :class:`Point` of the mesh it was spawned on), ``name``, ``class_name``,
    ``actor_id``, ``proc_id`` and ``creator`` (None: the runtime does not
    tell an actor who spawned it)."""

    __slots__ = ("rank", "name", "class_name", "actor_id", "creator", "_actor")

    def __init__(self, rank: Point, name: str, class_name: Optional[str], actor_id: ActorId,
                 actor: Any = None):
        self.rank = rank
        self.name = name
        self.class_name = class_name
        self.actor_id = actor_id
        self.creator: Optional[Instance] = None
        self._actor = actor

    @property
    def proc_id(self) -> str:
        return self.actor_id.proc_id

    @property
    def proc_mesh(self) -> Any:
        raise NotImplementedError(
            "context().actor_instance.proc_mesh: an actor cannot get a handle to the proc mesh "
            "it runs on yet; pass the ProcMesh to it as an argument (docs/python.md, "
            "\"Monarch compatibility\")")

    @property
    def proc(self) -> Any:
        raise NotImplementedError(
            "context().actor_instance.proc: an actor cannot get a handle to its own proc yet; "
            "pass the ProcMesh (sliced to its rank) to it as an argument (docs/python.md, "
            "\"Monarch compatibility\")")

    def __repr__(self) -> str:
        if self.class_name is None:
            return f"<{self.name}>"
        rank = str(self.rank) if len(self.rank) else ""
        return f"<{self.class_name} {self.name}{rank}>"


class Context:
    """What ``context()`` returns: ``actor_instance`` (:class:`Instance`) and
    ``message_rank`` (a :class:`Point`).

    ``message_rank`` is the actor's position in the slice the message was
    sent to (the context's "message" entry, which worker.py sets for a
    message to a slice), as in Monarch; ``actor_instance.rank`` is its
    position in the mesh it was spawned on."""

    __slots__ = ("actor_instance", "message_rank")

    def __init__(self, actor_instance: Instance, message_rank: Point):
        self.actor_instance = actor_instance
        self.message_rank = message_rank

    def __repr__(self) -> str:
        return f"<Context {self.actor_instance!r} message_rank={self.message_rank}>"


def _root() -> Context:
    rank = Point(0, _NO_DIMS)
    instance = Instance(rank, "root", None, ActorId("client", 0, f"controller-{os.getpid()}"))
    return Context(instance, rank)


def _point(info: Dict[str, Any]) -> Point:
    """The actor's point, made once per actor (kept in its context)."""
    point = info.get("_monarch_point")
    if point is None:
        point = info["_monarch_point"] = Point.of(info.get("point") or {},
                                                  info.get("sizes") or {})
    return point


def _message_point(info: Dict[str, Any], rank: Point) -> Point:
    """Where the current message's slice put this actor: the context's
    "message" entry ({"point": ..., "sizes": ...}) where the adverb says,
    else the actor's own point."""
    message = info.get("message")
    return Point.of(message["point"], message["sizes"]) if message else rank


def context() -> Context:
    """The running actor's :class:`Context`; in the controller, the root
    client's."""
    info = _context.current_context()
    if info is None:
        return _root()
    rank = _point(info)
    actor = _context.current_instance()
    cls = type(actor) if actor is not None else None
    class_name = f"{cls.__module__}.{cls.__qualname__}" if cls is not None else None
    name = str(info.get("mesh", ""))
    proc_id = str(info.get("proc_id") or f"proc[{info.get('proc_rank', 0)}]")
    actor_id = ActorId(name, int(info.get("rank", rank.rank)), proc_id)
    return Context(Instance(rank, name, class_name, actor_id, actor), _message_point(info, rank))


def current_rank() -> Point:
    """The running actor's position: a :class:`Point` (``.rank``, and
    ``point["gpu"]`` for each dimension of its mesh)."""
    info = _context.current_context()
    return Point(0, _NO_DIMS) if info is None else _message_point(info, _point(info))


def current_size() -> Dict[str, int]:
    """The sizes of the running actor's mesh: ``{"host": 2, "gpu": 4}``
    (``{}`` in the controller)."""
    info = _context.current_context()
    if info is None:
        return {}
    message = info.get("message")
    return dict(message["sizes"] if message else info.get("sizes") or {})


def current_actor_name() -> str:
    """``str(context().actor_instance.actor_id)``: distinct for each actor."""
    return str(context().actor_instance.actor_id)
