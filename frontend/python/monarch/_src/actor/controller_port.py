"""Where this program's controller takes ``get_or_spawn_controller``
requests from actors (``controllers.py``; docs/python.md, "Singleton
controllers").

Every spawn header carries the address of the controller's request port
(``actor_mesh.spawn``): at the controller it is opened at the first spawn
(``controllers`` installs the opener when it is imported); in an actor
worker it is the one the process's own actors were spawned with, so actors
that spawn actors pass it on and every actor of the program reaches the one
controller. This module only holds the address: it sits below the modules
that spawn, so none of them imports ``controllers``.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional, Tuple

Address = Tuple[str, int]

_lock = threading.Lock()
_inherited: Optional[Address] = None
# True once an actor was constructed here: this is a worker, not the
# controller (whose process hosts no actors).
_worker = False
_opener: Optional[Callable[[], Address]] = None


def set_opener(opener: Callable[[], Address]) -> None:
    """How the controller opens its request port (at the first spawn)."""
    global _opener
    _opener = opener


def inherit(address: Optional[Address]) -> None:
    """In an actor worker, at each actor's construction: the address its
    spawn header carried (the first one kept; every header of one program
    names the same controller)."""
    global _inherited, _worker
    _worker = True
    if address is None:
        return
    with _lock:
        if _inherited is None:
            _inherited = (str(address[0]), int(address[1]))


def inherited() -> Optional[Address]:
    """The controller's request port as this worker process learned it."""
    return _inherited


def in_worker() -> bool:
    """Whether this process hosts actors (a worker), not the controller."""
    return _worker


def for_header() -> Optional[Address]:
    """What a spawn from this process puts in the header: in a worker, the
    inherited address (None if it never got one); at the controller, its own
    request port, opened now if it is not yet."""
    if _worker:
        return _inherited
    opener = _opener
    return opener() if opener is not None else None
