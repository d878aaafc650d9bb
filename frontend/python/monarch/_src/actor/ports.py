"""Monarch's channels and ports: ``Channel.open()``, ``Port``,
``PortReceiver`` and ``send`` (docs/python.md, "Channels and ports").

``Channel.open()`` opens a runtime port in this process (frontend/csrc/
Ports.cpp over runtime/proc/Port.h) and returns ``(port, receiver)``. The
``Port`` is a reference -- the process's address and the port's number -- so
it pickles to any actor (a constructor or endpoint argument, a return value)
and ``port.send(value)`` works from wherever it is. Values travel as the
adverbs' do (``common.pickling``). ``receiver.recv()`` is a Future of the
next message; messages from one sender arrive in the order sent.
``port.exception(e)`` makes the receiver's next ``recv()`` raise ``e``.
``Channel.open_ranked()`` (or ``receiver.ranked()``) receives ``(rank,
value)``: the rank of the actor that sent it, for ports that ``send`` or an
``explicit_response_port`` endpoint handed to an actor of a mesh.

``send(endpoint, args, kwargs, port=port, selection="all"|"choose")``
(actor_mesh.py, beside the adverbs) sends a call without waiting for it:
each selected actor runs the endpoint and sends its result (or exception) to
``port`` (a ``monarch.remote`` function stands for an endpoint: each rank of
the active mesh runs it); an endpoint declared
``@endpoint(explicit_response_port=True)`` gets ``port`` itself as its first
argument and sends when it likes -- as it does through the adverbs, whose
calls wait for what it sends (replies.py).
"""

from __future__ import annotations

import traceback
from typing import Any, Generic, Optional, Tuple, TypeVar

from ..common.future import Future, HandleSource
from ..common.pickling import dumps
from .extension import actors
from .tensor_engine import loads_local

R = TypeVar("R")


class Port(Generic[R]):
    """Where a :class:`PortReceiver` is reached: ``send`` values to it from any
    process of the job. Pickles to a reference."""

    def __init__(self, addr: str, port: int, rank: Optional[int] = None):
        if not isinstance(addr, str) or not addr or not isinstance(port, int):
            raise TypeError("a Port is made by Channel.open(), not by hand")
        self._addr = addr
        self._port = port
        self._rank = rank

    def send(self, obj: R) -> None:
        """Sends ``obj`` to the receiver (fire and forget, in order)."""
        self._send(("ok", obj, self._rank))

    def exception(self, obj: BaseException) -> None:
        """Makes the receiver's ``recv()`` of this message raise ``obj``."""
        if not isinstance(obj, BaseException):
            raise TypeError(f"Port.exception takes an exception, got {obj!r}")
        self._send_frames(exception_frames(obj, self._rank))

    def _send(self, reply: Tuple[Any, ...]) -> None:
        self._send_frames(dumps(reply))

    def _send_frames(self, frames: Any) -> None:
        actors().send_to_port(self._addr, self._port, frames)

    def _as_rank(self, rank: int) -> "Port[R]":
        """This port as the actor of ``rank`` uses it: what it sends says who
        sent it (a :class:`RankedPortReceiver` gets ``(rank, value)``)."""
        return Port(self._addr, self._port, rank)

    def __reduce__(self) -> Any:
        return (Port, (self._addr, self._port, self._rank))

    def __repr__(self) -> str:
        rank = "" if self._rank is None else f" rank {self._rank}"
        return f"<Port {self._addr}#{self._port}{rank}>"


def exception_frames(obj: BaseException, rank: Optional[int]) -> Any:
    """The frames of ``port.exception(obj)`` sent as ``rank``."""
    tb = "".join(traceback.format_exception(type(obj), obj, obj.__traceback__))
    try:
        return dumps(("err", obj, tb, rank))
    except Exception:  # the exception does not pickle: its text does
        return dumps(("err", RuntimeError(f"{type(obj).__name__}: {obj}\n{tb}"), tb, rank))


def _reply(out: Any) -> Tuple[Any, Optional[int]]:
    """A port message's value and the rank that sent it (None: a port no mesh
    handed to an actor); an exception sent on the port is raised."""
    reply = loads_local(out[1])
    if reply[0] == "ok":
        return reply[1], reply[-1]
    raise reply[1]


def _received(out: Any) -> Any:
    return _reply(out)[0]


def _received_ranked(out: Any) -> Tuple[int, Any]:
    value, rank = _reply(out)
    if rank is None:
        raise ValueError("a RankedPortReceiver got a message without a rank: it was sent on "
                         "a Port no mesh handed to an actor (Channel.open()'s own port); "
                         "receive it with a PortReceiver")
    return rank, value


class PortReceiver(Generic[R]):
    """The receiving end of a channel: ``recv()`` is a Future of the next
    message (``.get()``, or ``await``). The port closes when the receiver is
    closed or dropped; what is sent after that is lost."""

    def __init__(self, handle: Any):
        self._handle = handle

    def recv(self) -> "Future[R]":
        return Future(HandleSource(self._handle.recv(), _received))

    def ranked(self) -> "RankedPortReceiver[R]":
        """The same receiver, giving ``(rank, value)`` for each message."""
        return RankedPortReceiver(self._handle)

    def close(self) -> None:
        self._handle.close()

    def __reduce__(self) -> Any:
        raise TypeError("a PortReceiver stays in the process that opened its channel; "
                        "send its Port instead")


class RankedPortReceiver(PortReceiver[R]):
    """A receiver whose ``recv()`` is a Future of ``(rank, value)``: the rank
    (in its mesh) of the actor that sent it. A message sent on a port no mesh
    handed to an actor has no rank: its ``recv()`` raises ``ValueError``."""

    def recv(self) -> "Future[Tuple[int, R]]":  # type: ignore[override]
        return Future(HandleSource(self._handle.recv(), _received_ranked))


class Channel(Generic[R]):
    """``port, receiver = Channel.open()``: a channel whose receiving end is in
    this process (the controller or an actor)."""

    @staticmethod
    def open(once: bool = False) -> Tuple[Port[R], PortReceiver[R]]:
        """``once``: the port takes one message."""
        handle = actors().PortReceiver(bool(once))
        addr, number = handle.ref()
        return Port(addr, number), PortReceiver(handle)

    @staticmethod
    def open_ranked(once: bool = False) -> Tuple[Port[R], RankedPortReceiver[R]]:
        """``Channel.open()`` whose receiver gives ``(rank, value)``."""
        port, receiver = Channel.open(once)
        return port, receiver.ranked()
