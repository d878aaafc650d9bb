"""The futures of ``endpoint.stream(...)``: the k-th one holds the k-th
reply to arrive, whichever actor sent it (Monarch's ``stream`` receives the
replies on one port, in arrival order)."""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional

from ..common.future import Future, Source

# How long one wait on the oldest pending reply lasts before the others are
# polled again (seconds).
_SLICE_S = 0.002


class _Arrivals:
    """The replies of one stream, moved from pending to arrived as they come."""

    def __init__(self, replies: List[Future[Any]]):
        self._pending = list(replies)
        self._arrived: List[Future[Any]] = []
        self._lock = threading.Lock()  # guards the lists
        self._waiting = threading.Lock()  # held by the thread waiting on a reply
        # The longest bound of the replies' (None, forever, if any has none).
        timeouts = [r._source.default_timeout for r in replies if r._source is not None]
        self.default_timeout: Optional[float] = (
            None if not timeouts or None in timeouts else max(timeouts))

    def _poll(self) -> None:
        still = []
        for reply in self._pending:
            (self._arrived if reply.done() else still).append(reply)
        self._pending = still

    def arrived(self, k: int) -> Optional[Future[Any]]:
        """The k-th reply if it has arrived; never blocks."""
        with self._lock:
            self._poll()
            return self._arrived[k] if k < len(self._arrived) else None

    def wait(self, k: int, timeout: Optional[float]) -> Optional[Future[Any]]:
        """The k-th reply, waiting at most ``timeout`` seconds (None: forever).
        One thread at a time waits on a reply; the others poll."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            reply = self.arrived(k)
            if reply is not None:
                return reply
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            step = _SLICE_S if left is None else min(_SLICE_S, left)
            if not self._waiting.acquire(timeout=step):
                continue
            try:
                with self._lock:
                    head = self._pending[0] if self._pending else None
                    alone = len(self._pending) == 1
                if head is not None:
                    # With nothing else to poll, wait on the last one outright.
                    head._resolve(left if alone else step)
            finally:
                self._waiting.release()


class _Nth(Source):
    def __init__(self, arrivals: _Arrivals, k: int):
        self._arrivals = arrivals
        self._k = k
        self.default_timeout = arrivals.default_timeout

    @staticmethod
    def _finish(future: Future[Any], reply: Future[Any]) -> None:
        if reply._error is not None:
            future._set(error=reply._error)
        else:
            future._set(reply._value)

    def wait(self, future: Future[Any], timeout: Optional[float]) -> None:
        reply = self._arrivals.wait(self._k, timeout)
        if reply is not None:
            self._finish(future, reply)

    def ready(self, future: Future[Any]) -> bool:
        reply = self._arrivals.arrived(self._k)
        if reply is None:
            return False
        self._finish(future, reply)
        return True


def in_arrival_order(replies: List[Future[Any]]) -> List[Future[Any]]:
    """One future per reply; the k-th completes with the k-th reply to arrive
    (its value or its error)."""
    arrivals = _Arrivals(replies)
    return [Future(_Nth(arrivals, k)) for k in range(len(replies))]
