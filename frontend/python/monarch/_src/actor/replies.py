"""Deferred replies: ``explicit_response_port`` endpoints called through the
adverbs (docs/python.md, "Channels and ports").

An endpoint declared ``@endpoint(explicit_response_port=True)`` (or called
through ``as_endpoint(..., explicit_response_port=True)``) answers through the
``Port`` it takes after ``self``, whenever it likes: before it returns, or
later, from any thread. Called through ``call``, ``call_one``, ``choose`` or
``stream``, the caller opens a channel for the call (:class:`Pending`) and
sends the message, through the same C++ adverb as any other (so messages
from one sender to an actor stay in order), with the channel's reference in
a frame of its own (``FLAG_REPLY_PORT``: even a message whose arguments do
not unpickle is answered there). The actor hands the endpoint an
:class:`AdverbPort` on that channel, as the actor's rank; the first message
of each rank is that rank's result -- a value, an exception (``ActorError``)
or the actor's failure (``SupervisionError``) -- and the adverb's futures are
built from them.

Nothing waits forever on a rank that can no longer answer:

* in the actor's process, every reply port handed out and not yet answered is
  in its actor's book (:class:`_Book`): when the actor stops (a
  ``BaseException``, ``ActorMesh.stop()``, an unhandled supervision event, a
  broadcast that raised) each is answered with the actor's failure; a port
  dropped unanswered -- not kept, never pickled away -- answers its call with
  an error that says so;
* in the caller's process, the supervision events it gets (a process that
  died, an actor that failed: :func:`on_event`), ``ActorMesh.stop()`` and the
  procs' ``stop()`` (:func:`fail_mesh`, :func:`fail_procs`) answer the pending
  calls of the ranks concerned through their channels; and until the endpoint
  has returned, the runtime's reply of the call is watched as well (a rank
  that failed before the message reached it).

A call's channel is closed, and forgotten, once every rank it waits for has
answered (for ``call``, once one failed), or when its futures are dropped.
"""

from __future__ import annotations

import math
import pickle
import queue
import re
import sys
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..common.errors import ActorError, SupervisionError
from ..common.future import Future, Source
from ..common.pickling import dumps
from .extension import actors
from .ports import Port, exception_frames
from .tensor_engine import loads_local

# The message's last frame is (addr, port) of the call's reply channel
# (kept in step with worker.py).
FLAG_REPLY_PORT = 16

# While the runtime's reply of a call is pending, the port is waited on in
# slices this long (growing from the first to the second, seconds), so that a
# rank the runtime fails before the endpoint runs is seen.
_SLICE_MIN_S = 0.002
_SLICE_MAX_S = 0.05
_FOREVER_MS = 10**9


# -- what replies mean (the adverbs' too: actor_mesh.py) -------------------------------

_WHERE = re.compile(r"^([^\[\s]+)\[(\d+)\]")
# A call to a rank already known to have failed (ActorMeshState::checkRanks).
_FAILED_RANK = re.compile(r"^actor mesh '([^']+)' rank (\d+) failed")


def _raise_status(code: str, message: str, endpoint: str) -> None:
    m = _WHERE.match(message) or _FAILED_RANK.match(message)
    mesh, rank = (m.group(1), int(m.group(2))) if m else ("", -1)
    if code in ("Supervision", "Closed"):
        raise SupervisionError(f"supervision: {message}", mesh, rank)
    if code == "Timeout":
        raise TimeoutError(message)
    raise ActorError(f"{mesh}[{rank}].{endpoint}" if m else endpoint, None,
                     f"{code}: {message}")


def _exited(mesh: str, rank: int, reason: str) -> str:
    """A failed actor's SupervisionError text: ours ("actor mesh 'm' rank r
    failed") and Monarch's ("Actor ... exited because of the following
    reason"), so that either's patterns match."""
    where = f"actor mesh '{mesh}'" + (f" rank {rank}" if rank >= 0 else "")
    actor = f"{mesh}[{rank}]" if rank >= 0 else mesh
    return (f"supervision: {where} failed: Actor {actor} exited because of the following "
            f"reason: {reason}")


def _unpack_reply(frames: List[Any], endpoint: str) -> Any:
    reply = loads_local(frames)
    if reply[0] == "ok":
        return reply[1]
    if reply[0] == "stopped":  # the actor failed an unhandled supervision event
        _, mesh, rank, reason = reply
        raise SupervisionError(_exited(mesh, rank, reason),
                               mesh, rank)
    _, exc, tb, where = reply
    raise ActorError(where, exc, tb)


def _failure(mesh: str, rank: int, reason: str) -> SupervisionError:
    return SupervisionError(_exited(mesh, rank, reason), mesh, rank)


# -- the caller's side ----------------------------------------------------------------

_pending: "weakref.WeakSet[Pending]" = weakref.WeakSet()
_pending_lock = threading.Lock()


def _live() -> List["Pending"]:
    with _pending_lock:
        return list(_pending)


class Pending:
    """The channel of one adverb's call of an ``explicit_response_port``
    endpoint and what has arrived on it: the first answer of each rank
    (``positions``: the ranks, in the spawned actor mesh, that the call went
    to). ``mode``: ``"one"`` (``call_one``, one rank), ``"choose"`` (one of
    ``positions``, which the first answer names), ``"mesh"`` (``call``: every
    rank, or the first failure) or ``"stream"`` (every rank, in arrival
    order).

    One thread at a time receives from the channel (``_pumping``); the others
    wait on the condition for what it records."""

    def __init__(self, mesh: Any, endpoint: str, positions: List[int], mode: str):
        state = mesh._state
        self._endpoint = endpoint
        self.cname = mesh._cname
        self.procs_key = state.name
        self.procs_mesh = state.procs.name
        self._positions = list(positions)
        self._proc_of = {p: mesh._root_ranks[p] for p in positions}
        self._mode = mode
        self._chosen: Optional[int] = None
        # choose: failures of candidates seen before the chosen rank is known.
        self._early: Dict[int, BaseException] = {}
        self._results: Dict[Any, Tuple[bool, Any]] = {}
        self._order: List[Any] = []  # the keys of _results in arrival order
        self._failed = False
        # The runtime's replies of the call not yet seen: (future, ranks, one).
        self._replies: List[Tuple[Any, List[int], bool]] = []
        self._slice = _SLICE_MIN_S
        self._cond = threading.Condition()
        self._pumping = False
        self._closed = False
        self._handle = actors().PortReceiver(False)
        self.addr, self.number = self._handle.ref()
        self._recv = self._handle.recv()
        self._frame = pickle.dumps((self.addr, self.number), protocol=5)
        with _pending_lock:
            _pending.add(self)

    # -- sending ----------------------------------------------------------------------
    def framed(self, frames: List[Any]) -> List[Any]:
        """The frames of the message with the channel's reference last."""
        return list(frames) + [self._frame]

    def watch(self, reply: Any, ranks: List[int], one: bool) -> None:
        """The runtime's reply of the message to ``ranks`` (a OneFuture if
        ``one``, else a MeshFuture): an error there fails those ranks."""
        with self._cond:
            self._replies.append((reply, list(ranks), one))

    def close(self) -> None:
        with self._cond:
            self._close()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self._replies = []
            self._handle.close()
            with _pending_lock:
                _pending.discard(self)

    # -- failures from this process ----------------------------------------------------
    def fail(self, ranks: List[int], reason: str) -> None:
        """Answers ``ranks`` with their actor's failure, through the channel
        (its waiter wakes up; a rank that answered already keeps its answer)."""
        if self._closed:
            return
        for rank in ranks:
            if rank in self._proc_of and rank not in self._results:
                try:
                    actors().send_to_port(self.addr, self.number,
                                          dumps(("failed", self.cname, rank, reason, rank)))
                except Exception:  # noqa: BLE001 - closed meanwhile
                    return

    def on_event(self, procs_key: str, mesh: str, rank: int, reason: str) -> None:
        if self._closed or procs_key.split("#", 1)[0] != self.procs_key:
            return
        if mesh == self.cname:
            self.fail([rank], reason)
        elif mesh == self.procs_mesh:
            self.fail([p for p, proc in self._proc_of.items() if proc == rank],
                      f"its process (rank {rank} of proc mesh '{mesh}') failed: {reason}")

    # -- what arrived (with _cond held) --------------------------------------------------
    def _decide(self, key: Any, ok: bool, value: Any) -> None:
        if key in self._results or self._settled():
            return
        self._results[key] = (ok, value)
        self._order.append(key)
        if not ok:
            self._failed = True

    def _settled(self) -> bool:
        """Every future of the call can be completed."""
        if self._mode == "choose":
            return self._chosen is not None and self._chosen in self._results
        if self._mode == "mesh" and self._failed:
            return True
        return len(self._order) >= len(self._positions)

    def _choose_rank(self, rank: int) -> None:
        if self._chosen is None:
            self._chosen = rank
            early = self._early.pop(rank, None)
            self._early.clear()
            if early is not None:
                self._decide(rank, False, early)

    def _take(self, frames: Any) -> None:
        """One message of the channel."""
        try:
            reply = loads_local(frames)
            kind, rank = reply[0], reply[-1]
        except Exception as e:  # noqa: BLE001 - a reply that does not unpickle here
            self._unranked(False, RuntimeError(f"a reply of {self._describe()} could not be "
                                               f"unpickled by the caller: {type(e).__name__}: {e}"))
            return
        if not isinstance(rank, int) or rank not in self._proc_of:
            return  # not from a rank of this call
        if kind == "ok":
            ok, value = True, reply[1]
        elif kind == "err":
            ok, value = False, ActorError(f"{self.cname}[{rank}].{self._endpoint}",
                                          reply[1], reply[2])
        elif kind in ("stopped", "failed"):
            _, mesh, at, reason, _ = reply
            ok, value = False, _failure(str(mesh), int(at), str(reason))
            if kind == "failed" and self._mode == "choose" and self._chosen is None:
                self._early[rank] = value  # fails the call only if it is the chosen one
                return
        else:
            return
        if self._mode == "choose":
            self._choose_rank(rank)
            if rank != self._chosen:
                return
        self._decide(rank, ok, value)

    def _unranked(self, ok: bool, value: Any) -> None:
        """An answer that names no rank: the call's one rank's, the chosen
        one's, or one more arrival."""
        if self._mode == "one":
            self._decide(self._positions[0], ok, value)
        elif self._mode == "choose":
            if self._chosen is None:
                self._chosen = -1
            self._decide(self._chosen, ok, value)
        else:
            self._decide(("unranked", len(self._order)), ok, value)

    def _check_replies(self) -> None:
        still = []
        for reply, ranks, one in self._replies:
            if not reply.ready():
                still.append((reply, ranks, one))
                continue
            out = reply.get(0)
            if out is None:
                still.append((reply, ranks, one))
                continue
            self._on_reply(out, ranks, one)
        self._replies = still

    def _on_reply(self, out: Any, ranks: List[int], one: bool) -> None:
        """The runtime's reply: ("deferred", rank) from each actor that ran
        the message (its answer comes on the channel), or the failure of ranks
        the message did not reach."""
        if out[0] == "err":
            try:
                _raise_status(out[1], out[2], self._endpoint)
            except BaseException as e:  # noqa: BLE001
                error = e
            if self._mode == "choose":
                self._unranked(False, error)
                return
            for rank in ranks:
                self._decide(rank, False, error)
            return
        for i, frames in enumerate([out[1]] if one else out[1]):
            try:
                reply = loads_local(frames)
                if reply[0] == "deferred":
                    if self._mode == "choose":
                        self._choose_rank(int(reply[1]))
                    continue
                # An answer given in the reply itself (not by this module's worker).
                value: Tuple[bool, Any] = (True, _unpack_reply(frames, self._endpoint))
            except BaseException as e:  # noqa: BLE001
                value = (False, e)
            if self._mode == "choose":
                self._unranked(*value)
            elif i < len(ranks):
                self._decide(ranks[i], *value)

    def _absorb(self, received: List[Any]) -> None:
        for frames in received:
            self._take(frames)
        if self._replies:
            self._check_replies()
        if self._settled():
            self._close()

    def _receive(self, timeout: Optional[float]) -> List[Any]:
        """What arrives on the channel within ``timeout`` (None: no bound), and
        what arrived with it. Without _cond: only the pumping thread calls it."""
        if self._replies:
            step = self._slice
            self._slice = min(self._slice * 2, _SLICE_MAX_S)
            timeout = step if timeout is None else min(timeout, step)
        if timeout is None or not timeout * 1000 < _FOREVER_MS:
            ms = _FOREVER_MS
        else:
            ms = max(int(math.ceil(timeout * 1000)), 0)
        out = []
        got = self._recv.get(ms)
        while got is not None:
            out.append(got[1])
            self._recv = self._handle.recv()
            got = self._recv.get(0) if self._recv.ready() else None
        return out

    # -- waiting -------------------------------------------------------------------------
    def wait_for(self, decided: Callable[[], bool], timeout: Optional[float]) -> bool:
        """Waits until ``decided()`` (called with the lock held) or ``timeout``
        seconds passed (None: no bound); whether it is decided."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not decided():
                if self._closed:
                    return decided()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                if self._pumping:  # another thread receives: it records for all
                    self._cond.wait(left)
                    continue
                self._pumping = True
                self._cond.release()
                try:
                    received = self._receive(left)
                finally:
                    self._cond.acquire()
                    self._pumping = False
                try:
                    self._absorb(received)
                finally:
                    self._cond.notify_all()
            return True

    def poll(self) -> None:
        """Records what has arrived, without waiting."""
        with self._cond:
            if self._pumping or self._closed:
                return
            received = []
            while self._recv.ready():
                got = self._recv.get(0)
                if got is None:
                    break
                received.append(got[1])
                self._recv = self._handle.recv()
            self._absorb(received)

    def _describe(self) -> str:
        return f"endpoint {self.cname}.{self._endpoint}"

    # -- the adverbs' futures ----------------------------------------------------------
    def one_future(self) -> Future[Any]:
        """``call_one`` (the call's one rank) and ``choose`` (the chosen one)."""
        def decided() -> bool:
            key = self._chosen if self._mode == "choose" else self._positions[0]
            return key is not None and key in self._results

        def value() -> Tuple[bool, Any]:
            key = self._chosen if self._mode == "choose" else self._positions[0]
            return self._results[key]

        return Future(_Answer(self, decided, value))

    def mesh_future(self, combine: Callable[[List[Any]], Any]) -> Future[Any]:
        """``call``: ``combine`` of the values in the order of ``positions``
        once every rank answered; the first failure to arrive fails it."""
        def decided() -> bool:
            return self._failed or all(p in self._results for p in self._positions)

        def value() -> Tuple[bool, Any]:
            for key in self._order:
                ok, v = self._results[key]
                if not ok:
                    return False, v
            return True, combine([self._results[p][1] for p in self._positions])

        return Future(_Answer(self, decided, value))

    def stream_futures(self) -> List[Future[Any]]:
        """``stream``: the k-th future completes with the k-th answer to arrive."""
        def nth(k: int) -> Future[Any]:
            return Future(_Answer(self, lambda: len(self._order) > k,
                                  lambda: self._results[self._order[k]]))

        return [nth(k) for k in range(len(self._positions))]


class _Answer(Source):
    """A future of what ``pending`` has received: complete once ``decided()``,
    with ``value()`` -- (True, value) or (False, error)."""

    def __init__(self, pending: Pending, decided: Callable[[], bool],
                 value: Callable[[], Tuple[bool, Any]]):
        self._pending = pending
        self._decided = decided
        self._value = value

    def _finish(self, future: Future[Any]) -> None:
        with self._pending._cond:
            ok, value = self._value()
        if ok:
            future._set(value)
        else:
            future._set(error=value)

    def wait(self, future: Future[Any], timeout: Optional[float]) -> None:
        if self._pending.wait_for(self._decided, timeout):
            self._finish(future)

    def ready(self, future: Future[Any]) -> bool:
        self._pending.poll()
        with self._pending._cond:
            decided = self._decided()
        if decided:
            self._finish(future)
        return decided


def on_event(procs_key: str, kind: str, mesh: str, rank: int, reason: str) -> None:
    """A supervision event of this process (supervision.dispatch): the
    pending calls of the ranks it concerns fail -- an actor that failed, or
    the actors of a process that died or stopped answering."""
    if kind == "responsive":
        return
    for pending in _live():
        pending.on_event(procs_key, mesh, rank, reason)


def fail_mesh(cname: str, reason: str) -> None:
    """``ActorMesh.stop()``: the mesh's pending calls fail."""
    for pending in _live():
        if pending.cname == cname:
            pending.fail(list(pending._proc_of), reason)


def fail_procs(procs_key: str, reason: str) -> None:
    """The procs were stopped: the pending calls of their actors fail."""
    for pending in _live():
        if pending.procs_key == procs_key:
            pending.fail(list(pending._proc_of), reason)


# -- the actor's side ----------------------------------------------------------------


class _Book:
    """The reply ports an actor handed out that are not yet answered."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # reentrant: a port's finalizer may run under it
        self.tickets: set = set()

    def add(self, ticket: "_Ticket") -> None:
        with self.lock:
            self.tickets.add(ticket)

    def forget(self, ticket: "_Ticket") -> None:
        with self.lock:
            self.tickets.discard(ticket)

    def take(self) -> List["_Ticket"]:
        with self.lock:
            out = list(self.tickets)
            self.tickets.clear()
        return out


def _book(instance: Any) -> _Book:
    return instance.__dict__.setdefault("_monarch_replies", _Book())


def _send(addr: str, number: int, frames: List[Any]) -> None:
    actors().send_to_port(addr, number, frames)


class ReplyTo:
    """The reply channel of one message to this actor (FLAG_REPLY_PORT):
    everything the actor answers for that call goes there."""

    def __init__(self, frame: Any, info: Dict[str, Any], method: str):
        self.addr, self.number = pickle.loads(memoryview(frame))
        self.mesh = str(info.get("mesh"))
        self.rank = int(info.get("rank", 0))
        self.where = f"{self.mesh}[{self.rank}].{method}"
        self.ticket: Optional[_Ticket] = None

    def port(self, instance: Any) -> "AdverbPort[Any]":
        """The Port the endpoint gets: kept in the actor's book until answered."""
        self.ticket = _Ticket(self, _book(instance))
        return AdverbPort(self.ticket)

    def send(self, value: Any) -> None:
        """An endpoint that takes no port: its result is the answer."""
        _send(self.addr, self.number, dumps(("ok", value, self.rank)))

    def error(self, exc: BaseException, tb: str) -> None:
        """The endpoint raised: the answer, unless it had answered already."""
        ticket = self.ticket
        if ticket is not None and not ticket.claim():
            if ticket.state == "answered":
                sys.stderr.write(f"monarch: {self.where} raised after sending its reply "
                                 f"(the reply stands):\n{tb}")
            return
        try:
            frames = dumps(("err", exc, tb, self.rank))
        except Exception:  # the exception does not pickle: its traceback does
            frames = dumps(("err", None, tb, self.rank))
        try:
            _send(self.addr, self.number, frames)
        except Exception as e:  # noqa: BLE001 - the caller is gone
            sys.stderr.write(f"monarch: {self.where}: answering its caller: {e}\n")

    def stopped(self, reason: str) -> None:
        """The actor is stopped: the answer is its failure."""
        if self.ticket is not None:
            self.ticket.fail(reason)
            return
        _stopped(self.addr, self.number, self.mesh, self.rank, reason)

    def returned(self) -> None:
        if self.ticket is not None:
            self.ticket.running = False

    def deferred(self) -> List[Any]:
        """The runtime's reply of the call: which rank ran it (its answer
        comes on the channel)."""
        return dumps(("deferred", self.rank))


def _stopped(addr: str, number: int, mesh: str, rank: int, reason: str) -> None:
    try:
        _send(addr, number, dumps(("stopped", mesh, rank, reason, rank)))
    except Exception as e:  # noqa: BLE001 - the caller is gone
        sys.stderr.write(f"monarch: {mesh}[{rank}]: telling a caller it stopped: {e}\n")


class _Ticket:
    """One reply port as its actor's book keeps it: ``state`` is "open",
    "answered" (sent on) or "failed" (answered for it: the actor stopped, or
    the port was dropped unanswered)."""

    def __init__(self, reply: ReplyTo, book: _Book):
        self.addr, self.number, self.rank = reply.addr, reply.number, reply.rank
        self.mesh, self.where = reply.mesh, reply.where
        self.book = book
        self.lock = threading.RLock()
        self.state = "open"
        self.escaped = False  # pickled: it may answer from elsewhere
        self.running = True  # the endpoint has not returned yet
        book.add(self)

    def claim(self) -> bool:
        """Marks it answered if it was open; whether it was."""
        with self.lock:
            if self.state != "open":
                return False
            self.state = "answered"
        self.book.forget(self)
        return True

    def answer(self, build: Callable[[], List[Any]]) -> None:
        with self.lock:
            if self.state == "failed":
                return  # the caller has its answer (the actor's failure): dropped
            if self.state == "answered":
                raise RuntimeError(f"{self.where}: the reply port of a call takes one value "
                                   "(it was sent on already)")
            frames = build()  # an object that does not pickle raises here, still open
            self.state = "answered"
        self.book.forget(self)
        _send(self.addr, self.number, frames)

    def fail(self, reason: str) -> None:
        with self.lock:
            if self.state != "open":
                return
            self.state = "failed"
        self.book.forget(self)
        _stopped(self.addr, self.number, self.mesh, self.rank, reason)


class AdverbPort(Port[Any]):
    """The Port an ``explicit_response_port`` endpoint gets through an adverb:
    the call's reply is the first thing sent on it -- ``send(value)`` or
    ``exception(e)``, before or after the endpoint returns, from any thread
    (a second send raises). It pickles to a plain Port of the same channel
    and rank (an actor it is passed to may answer); kept here, it is in the
    actor's book, answered with the actor's failure if the actor stops."""

    def __init__(self, ticket: _Ticket):
        super().__init__(ticket.addr, ticket.number, ticket.rank)
        self._ticket = ticket
        weakref.finalize(self, _dropped, ticket).atexit = False  # not for a process ending
        _start_drops()

    def send(self, obj: Any) -> None:
        self._ticket.answer(lambda: dumps(("ok", obj, self._rank)))

    def exception(self, obj: BaseException) -> None:
        if not isinstance(obj, BaseException):
            raise TypeError(f"Port.exception takes an exception, got {obj!r}")
        self._ticket.answer(lambda: exception_frames(obj, self._rank))

    def _as_rank(self, rank: int) -> Port[Any]:
        self._ticket.escaped = True
        return Port(self._addr, self._port, rank)

    def __reduce__(self) -> Any:
        self._ticket.escaped = True
        return (Port, (self._addr, self._port, self._rank))


# Ports dropped unanswered, told to their callers by one thread per process
# (a finalizer may run anywhere -- under locks, in the garbage collector --
# so it only queues).
_drops: "queue.SimpleQueue[Tuple[_Ticket, bool]]" = queue.SimpleQueue()
_drops_thread: List[threading.Thread] = []
_drops_lock = threading.Lock()


def _dropped(ticket: _Ticket) -> None:
    ticket.book.forget(ticket)  # reentrant lock, never held while waiting on anything
    _drops.put((ticket, ticket.running))


def _start_drops() -> None:
    if _drops_thread:
        return
    with _drops_lock:
        if not _drops_thread:
            thread = threading.Thread(target=_tell_drops, name="monarch-reply-drops",
                                      daemon=True)
            thread.start()
            _drops_thread.append(thread)


def _tell_drops() -> None:
    while True:
        ticket, running = _drops.get()
        try:
            with ticket.lock:
                tell = ticket.state == "open" and not ticket.escaped
                if tell:
                    ticket.state = "failed"
            ticket.book.forget(ticket)
            if not tell:
                continue
            if running:
                what = "returned without sending on its port, keeping no reference to it"
            else:
                what = "dropped the port of its reply without sending on it"
            error = RuntimeError(
                f"{ticket.where} (explicit_response_port) {what}: an endpoint called through "
                "an adverb answers by port.send(value) or port.exception(e), before or after "
                "it returns")
            _send(ticket.addr, ticket.number, exception_frames(error, ticket.rank))
        except BaseException as e:  # noqa: BLE001 - the thread lives on
            try:
                sys.stderr.write(f"monarch: telling a caller its reply port was dropped: {e}\n")
            except Exception:
                pass


def fail_outstanding(instance: Any, reason: str) -> None:
    """The actor stopped: each reply port it holds unanswered answers its
    call with the actor's failure."""
    book = instance.__dict__.get("_monarch_replies")
    if book is None:
        return
    for ticket in book.take():
        ticket.fail(reason)


__all__ = ["FLAG_REPLY_PORT", "Pending", "AdverbPort", "ReplyTo", "on_event", "fail_mesh",
           "fail_procs", "fail_outstanding"]
