"""The one Future of the frontend (docs/python.md, "Futures").

Every asynchronous result -- a fetched shard (``fetch_shard``), an adverb's
reply (``mesh.endpoint.call(...)``), a stopped mesh, an RDMA transfer -- is a
:class:`Future`: ``get(timeout)`` blocks (``result`` is the same),
``done()`` does not, ``exception()`` returns the error instead of raising it,
and ``await fut`` waits without blocking the event loop.

Where the value comes from is a :class:`Source`, so one class serves every
kind: a source is asked to ``wait`` until it has completed the future (or a
deadline passes) and whether it is ``ready`` without waiting. Completed
futures (``Future.ready(value)``) need no source.
"""

from __future__ import annotations

import numbers
import time
from typing import Any, Callable, Generic, List, Optional, TypeVar

T = TypeVar("T")
U = TypeVar("U")

_UNSET: Any = object()
_FOREVER_MS = 10**9


def check_timeout(timeout: Any) -> Optional[float]:
    """A ``get(timeout)``: None (no bound) or a number of seconds >= 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout is a number of seconds or None, got {type(timeout).__name__}")
    if not timeout >= 0:  # NaN too
        raise ValueError(f"timeout must be non-negative (seconds) or None, got {timeout}")
    return timeout


class Source:
    """Where a pending Future's value comes from."""

    #: How long ``get()`` without a timeout waits (seconds); None: forever.
    default_timeout: Optional[float] = None

    def wait(self, future: "Future[Any]", timeout: Optional[float]) -> None:
        """Blocks until ``future`` is complete or ``timeout`` seconds passed
        (None: no bound); completes it through ``future._set``."""
        raise NotImplementedError

    def ready(self, future: "Future[Any]") -> bool:
        """Completes ``future`` if its value has arrived; never blocks."""
        return False

    def timeout_error(self, timeout: Optional[float]) -> BaseException:
        return TimeoutError(f"no result within {timeout} s (the call is still pending)")


class Future(Generic[T]):
    """A value that arrives later; see the module docstring."""

    def __init__(self, source: Optional[Source] = None):
        self._source = source
        self._value: Any = _UNSET
        self._error: Optional[BaseException] = None

    @classmethod
    def ready(cls, value: T) -> "Future[T]":
        """A future that already holds ``value``."""
        f: Future[T] = cls()
        f._value = value
        return f

    @classmethod
    def failed(cls, error: BaseException) -> "Future[Any]":
        f: Future[Any] = cls()
        f._error = error
        return f

    # -- completion (sources) -----------------------------------------------------
    def _set(self, value: Any = None, error: Optional[BaseException] = None) -> None:
        if error is not None:
            self._error = error
        else:
            self._value = value
        self._source = None

    @property
    def _complete(self) -> bool:
        return self._error is not None or self._value is not _UNSET

    def _resolve(self, timeout: Optional[float]) -> bool:
        if not self._complete and self._source is not None:
            self._source.wait(self, timeout)
        return self._complete

    # -- the API ----------------------------------------------------------------------
    def get(self, timeout: Optional[float] = None) -> T:
        """The value; waits at most ``timeout`` seconds (default: the source's
        bound, e.g. the mesh's ``timeout_ms`` for a fetch; forever for an
        adverb) and raises TimeoutError after it. Raises the error the value
        failed with."""
        timeout = check_timeout(timeout)
        if timeout is None and self._source is not None:
            timeout = self._source.default_timeout
        if not self._resolve(timeout):
            source = self._source
            raise (source.timeout_error(timeout) if source is not None
                   else TimeoutError(f"no result within {timeout} s"))
        if self._error is not None:
            raise self._error
        return self._value

    result = get

    def done(self) -> bool:
        if not self._complete and self._source is not None:
            self._source.ready(self)
        return self._complete

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The error the value failed with, or None; waits like ``get``."""
        timeout = check_timeout(timeout)
        if timeout is None and self._source is not None:
            timeout = self._source.default_timeout
        if not self._resolve(timeout):
            raise TimeoutError(f"no result within {timeout} s")
        return self._error

    def then(self, fn: Callable[[T], U]) -> "Future[U]":
        """A future of ``fn(value)`` (errors pass through unchanged)."""
        if not callable(fn):
            raise TypeError(f"then takes a callable, got {fn!r}")
        return Future(_Mapped(self, fn))

    def __await__(self):
        if self.done():
            async def now() -> T:
                return self.get()
            return now().__await__()
        import asyncio  # ~10 ms to import: only programs that await pay it

        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, self.get).__await__()

    # -- driven as a coroutine ---------------------------------------------------------
    # Monarch's asynchronous methods (``ProcMesh.logging_option``, ...) are
    # coroutines, which programs hand to ``asyncio.run`` or
    # ``asyncio.create_task``; those take only coroutines, so a Future is one
    # too: send/throw/close drive the iterator of its ``__await__``.
    def _driver(self) -> Any:
        it = self.__dict__.get("_monarch_await")
        if it is None:
            it = self.__dict__["_monarch_await"] = self.__await__()
        return it

    def send(self, value: Any) -> Any:
        return self._driver().send(value)

    def throw(self, *exc: Any) -> Any:
        return self._driver().throw(*exc)

    def close(self) -> None:
        it = self.__dict__.pop("_monarch_await", None)
        if it is not None and hasattr(it, "close"):
            it.close()

    def __repr__(self) -> str:
        if not self._complete:
            return "<monarch.Future pending>"
        return f"<monarch.Future {'failed' if self._error is not None else 'done'}>"


class _Mapped(Source):
    def __init__(self, inner: Future[Any], fn: Callable[[Any], Any]):
        self._inner = inner
        self._fn = fn
        self.default_timeout = inner._source.default_timeout if inner._source else None

    def _finish(self, future: Future[Any]) -> None:
        if self._inner._error is not None:
            future._set(error=self._inner._error)
            return
        try:
            future._set(self._fn(self._inner._value))
        except BaseException as e:  # noqa: BLE001 - delivered by get()
            future._set(error=e)

    def wait(self, future: Future[Any], timeout: Optional[float]) -> None:
        if self._inner._resolve(timeout):
            self._finish(future)

    def ready(self, future: Future[Any]) -> bool:
        if self._inner.done():
            self._finish(future)
            return True
        return False

    def timeout_error(self, timeout: Optional[float]) -> BaseException:
        src = self._inner._source
        return src.timeout_error(timeout) if src is not None else super().timeout_error(timeout)


class Gathered(Source):
    """A future of several: ``combine([values...])``, the first error wins."""

    def __init__(self, parts: List[Future[Any]], combine: Callable[[List[Any]], Any]):
        self._parts = parts
        self._combine = combine

    def _finish(self, future: Future[Any]) -> None:
        for p in self._parts:
            if p._error is not None:
                future._set(error=p._error)
                return
        try:
            future._set(self._combine([p._value for p in self._parts]))
        except BaseException as e:  # noqa: BLE001
            future._set(error=e)

    def wait(self, future: Future[Any], timeout: Optional[float]) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for p in self._parts:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not p._resolve(left):
                return
            if p._error is not None:
                break
        self._finish(future)

    def ready(self, future: Future[Any]) -> bool:
        if all(p.done() for p in self._parts):
            self._finish(future)
            return True
        return False


def gather(parts: List[Future[Any]], combine: Callable[[List[Any]], Any] = list) -> Future[Any]:
    return Future(Gathered(parts, combine))


class HandleSource(Source):
    """A future of a C++ extension's handle (``get(ms)`` -> None while pending,
    ``ready()``): an adverb's reply, an RDMA transfer. ``convert`` turns what
    it returns into the value (or raises the error)."""

    def __init__(self, handle: Any, convert: Callable[[Any], Any]):
        self._handle = handle
        self._convert = convert

    def wait(self, future: Future[Any], timeout: Optional[float]) -> None:
        if timeout is None or not timeout * 1000 < _FOREVER_MS:  # inf too
            ms = _FOREVER_MS
        else:
            ms = max(int(timeout * 1000), 0)
        out = self._handle.get(ms)
        if out is None:
            return
        try:
            future._set(self._convert(out))
        except BaseException as e:  # noqa: BLE001 - delivered by get()
            future._set(error=e)

    def ready(self, future: Future[Any]) -> bool:
        if self._handle.ready():
            self.wait(future, 0)
            return True
        return False
