"""``shutdown_context()``: Monarch's end of everything a program started
(docs/python.md, "Lifecycle").

In order: every proc mesh this process spawned that still runs (newest first:
an actor holding a reference to an older mesh goes before it; ``this_proc()``,
the ``hosts_from_config`` stand-in and the singleton controllers on
``this_proc()`` among them), then the actor procs it still holds a handle on
(meshes reached through references). The singleton registry is emptied, so a
later ``get_or_spawn_controller`` spawns anew, as a later ``this_proc()``
does. Everything has ended when it returns; the Future it returns is
complete (failed with the first error, if a stop failed). Calling it again
stops only what was started since: with nothing running it is a completed
Future at once, as Monarch's second call is.
"""

from __future__ import annotations

import threading
from typing import List

from ..common.future import Future
from . import controllers, proc_mesh, procs

_lock = threading.Lock()


def shutdown_context() -> "Future[None]":
    errors: List[BaseException] = []
    with _lock:
        for mesh in proc_mesh.live_meshes():
            try:
                mesh.stop().get()
            except Exception as e:  # noqa: BLE001 - the others still stop
                errors.append(e)
        errors += procs.stop_all()
        controllers.forget_all()
    return Future.failed(errors[0]) if errors else Future.ready(None)
