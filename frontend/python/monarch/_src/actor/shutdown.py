"""``shutdown_context()``: Monarch's end of everything a program started
(docs/python.md, "Lifecycle").

Stops every proc mesh this process spawned that is still running (newest
first: an actor holding a reference to an older mesh goes before it), the
``this_proc()`` mesh among them. The returned Future is
completed when all of them have ended (failed with the first error if a stop
failed). Calling it again stops only what was spawned since: with nothing
running it is a completed Future at once, as Monarch's second call is. Meshes
may be spawned again afterwards.
"""

from __future__ import annotations

from typing import List

from ..common.future import Future
from . import proc_mesh


def shutdown_context() -> "Future[None]":
    errors: List[BaseException] = []
    for mesh in proc_mesh.live_meshes():
        try:
            mesh.stop().get()
        except Exception as e:  # noqa: BLE001 - the others still stop
            errors.append(e)
    return Future.failed(errors[0]) if errors else Future.ready(None)
