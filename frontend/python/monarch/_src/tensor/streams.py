"""Streams (DESIGN.md §6.4): every tensor belongs to the stream that created
it; ops run on the active stream, concurrently across streams of a worker
and in order on one. Borrows move access between streams (``borrows.py``)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Tuple

from . import borrows


class Stream:
    """A stream of every worker. Ops run on the active stream, in order."""

    def __init__(self, name: str, _default: bool = False):
        if not isinstance(name, str):
            raise TypeError(f"a stream's name must be a str, not {type(name).__name__}")
        if not name and not _default:
            raise ValueError("a stream needs a non-empty name")
        self.name = name
        self._default = _default
        #: The name in IR and plans ("" for the default stream).
        self.ir_name = "" if _default else name

    @contextlib.contextmanager
    def activate(self) -> Iterator["Stream"]:
        global _active
        prev = _active
        _active = self
        try:
            yield self
        finally:
            _active = prev

    def borrow(self, t: Any, mutable: bool = False) -> Tuple[Any, Any]:
        """``(t2, borrow)``: ``t`` usable on this stream until ``borrow.drop()``."""
        return borrows.borrow(self, t, mutable)

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
