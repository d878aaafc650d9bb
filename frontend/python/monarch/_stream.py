"""Streams and borrows (DESIGN.md §6.4)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Tuple

from ._location import user_location


class Stream:
    """A stream of every worker. Ops run on the active stream, in order."""

    def __init__(self, name: str, _default: bool = False):
        if not isinstance(name, str) or (not name and not _default):
            raise ValueError("a stream needs a non-empty name")
        self.name = name
        self._default = _default

    @property
    def ir_name(self) -> str:
        """The name in IR and plans ("" for the default stream)."""
        return "" if self._default else self.name

    @contextlib.contextmanager
    def activate(self) -> Iterator["Stream"]:
        global _active
        prev = _active
        _active = self
        try:
            yield self
        finally:
            _active = prev

    def borrow(self, t: Any, mutable: bool = False) -> Tuple[Any, "Borrow"]:
        from ._tensor import borrow

        return borrow(self, t, mutable)

    def __repr__(self) -> str:
        return f"<monarch.Stream {self.name!r}>"


_default_stream = Stream("main", _default=True)
_active: Stream = _default_stream


def get_active_stream() -> Stream:
    return _active


def set_active_stream(stream: Stream) -> Stream:
    """Makes ``stream`` active; returns the one active before."""
    global _active
    prev, _active = _active, stream
    return prev


def default_stream() -> Stream:
    return _default_stream


class Borrow:
    """A borrow of a tensor onto another stream; ends with :meth:`drop`."""

    def __init__(self, session: Any, id: int, origin_ref: Any, result_ref: Any, mutable: bool,
                 origin_mesh: Any, origin_stream: Stream, stream: Stream, location: str):
        self._session = session
        self.id = id
        self._origin_ref = origin_ref
        self._result_ref = result_ref
        self.mutable = mutable
        self._origin_mesh = origin_mesh
        self._origin_stream = origin_stream
        self._stream = stream
        self.location = location
        self.dropped_at: Optional[str] = None

    @property
    def dropped(self) -> bool:
        return self.dropped_at is not None

    def drop(self) -> None:
        if self.dropped:
            return
        from ._tensor import drop_borrow

        drop_borrow(self, user_location())

    def __enter__(self) -> "Borrow":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.drop()

    def __repr__(self) -> str:
        state = f"dropped at {self.dropped_at}" if self.dropped else "live"
        kind = "mutable" if self.mutable else "read-only"
        return f"<monarch.Borrow {self.id} {kind} onto {self._stream.name!r}, {state}>"
