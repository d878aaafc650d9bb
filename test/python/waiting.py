"""Waiting on a condition in tests: polled, bounded, failing with what it
waited for (never a bare sleep)."""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0,
               what: str = "condition") -> Any:
    """The first truthy value of ``predicate()``, polled every 10 ms; an
    assertion error naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
