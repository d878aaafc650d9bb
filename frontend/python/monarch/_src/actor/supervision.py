"""Supervision events and who handles them (docs/python.md, "Supervision").

The runtime's hooks run on its io thread, which may neither block nor take
the GIL, so they only queue events; one thread per process
(:func:`start_dispatcher`) takes them and runs the owner's
``__supervise__`` -- or, at the controller, ``monarch.actor.unhandled_fault_hook``.
"""

from __future__ import annotations

import atexit
import sys
import threading
import traceback
import weakref
from typing import Any, Callable, Dict, Optional

from . import context, replies
from .extension import actors


class SupervisionEvent:
    """What ``__supervise__`` receives: ``mesh`` failed at ``rank`` because of
    ``reason``. ``mesh`` names an actor mesh (an actor stopped, or an owning
    actor below did not handle an event of its own children) or the proc mesh
    of a process that died."""

    def __init__(self, mesh: str, rank: int, reason: str, procs: str = ""):
        self.mesh = mesh
        self.rank = rank
        self.reason = reason
        self.procs = procs

    def report(self) -> str:
        return str(self)

    def __str__(self) -> str:
        return f"supervision: mesh '{self.mesh}' rank {self.rank} failed: {self.reason}"

    def __repr__(self) -> str:
        return f"<SupervisionEvent {self}>"

    def __reduce__(self):
        return (SupervisionEvent, (self.mesh, self.rank, self.reason, self.procs))


def report_unhandled(event: SupervisionEvent) -> None:
    """The default ``monarch.actor.unhandled_fault_hook``: report and go on."""
    sys.stderr.write(f"monarch: unhandled supervision event at the controller: {event}\n")
    sys.stderr.flush()


def fault_hook() -> Callable[[SupervisionEvent], Any]:
    """The hook as the user left it: ``monarch.actor.unhandled_fault_hook`` is
    a module attribute users assign, so it is read from that public module
    (when it was imported) at each event."""
    public = sys.modules.get("monarch.actor")
    return getattr(public, "unhandled_fault_hook", report_unhandled)


# -- the per-process dispatcher -------------------------------------------------

_by_name: Dict[str, "weakref.ref[Any]"] = {}
_lock = threading.Lock()
_dispatcher: Optional[threading.Thread] = None
_dispatcher_stop = threading.Event()


def register(state: Any) -> None:
    """Events of the proc mesh named ``state.name`` go to ``state``'s owner."""
    with _lock:
        _by_name[state.name] = weakref.ref(state)
    start_dispatcher()


def registered(name: str) -> Any:
    """The live state registered under ``name`` in this process, or None."""
    with _lock:
        ref = _by_name.get(name)
    return ref() if ref is not None else None


def start_dispatcher() -> None:
    global _dispatcher
    with _lock:
        if _dispatcher is not None:
            return
        _dispatcher = threading.Thread(target=_dispatch_loop, name="monarch-supervision",
                                       daemon=True)
        _dispatcher.start()

    def stop() -> None:
        _dispatcher_stop.set()
        if _dispatcher is not None:
            _dispatcher.join(timeout=2)

    atexit.register(stop)


def _dispatch_loop() -> None:
    ext = actors()
    while not _dispatcher_stop.is_set():
        queued = ext.next_supervision_event(100)
        if queued is None:
            continue
        procs_name, kind, mesh, rank, reason = queued
        try:
            dispatch(procs_name, kind, SupervisionEvent(mesh, rank, reason, procs_name))
        except BaseException as e:  # noqa: BLE001 - the dispatcher must live on
            sys.stderr.write(f"monarch: handling {mesh}[{rank}] failed: {e!r}\n")


def dispatch(procs_name: str, kind: str, event: SupervisionEvent) -> None:
    try:  # first: calls waiting for a deferred reply from the failed ranks fail
        replies.on_event(procs_name, kind, event.mesh, event.rank, event.reason)
    except Exception as e:  # noqa: BLE001 - the event is still handled
        sys.stderr.write(f"monarch: failing the pending replies of {event}: {e!r}\n")
    ref = _by_name.get(procs_name)
    state = ref() if ref is not None else None
    if state is None or state.stopped:
        return
    if getattr(state, "attached", False) and kind != "escalated" and not state.meshes:
        # Procs reached through a reference, with no actors spawned from
        # here: their failures are their spawner's to handle (calls from
        # here raise SupervisionError all the same).
        return
    if kind == "escalated":
        with _lock:
            state.failed.setdefault(event.mesh, {})[event.rank] = event.reason
    owner = state.owners.get(event.mesh, state.owner)
    if owner is None:
        fault_hook()(event)
        return
    supervise(owner, event)


def supervise(instance: Any, event: SupervisionEvent) -> None:
    """Runs the owner's ``__supervise__(event)`` (under the actor's lock, in its
    context). Unless it returns True the owner fails: its endpoints answer
    with a supervision error from now on and the event goes up to its own
    owner (the controller or another actor) as a failure of this actor."""
    info = instance.__dict__.get("_monarch_context") or {}
    handler = getattr(instance, "__supervise__", None)
    with context.entered(instance, info):
        lock = instance.__dict__["_monarch_lock"]
        # Between messages the actor's thread may hold the lock running its
        # asyncio tasks (worker.idle): ask it to stop until the next message.
        while not lock.acquire(timeout=0.05):
            interrupt = instance.__dict__.get("_monarch_interrupt_idle")
            if interrupt is not None:
                interrupt()
        try:
            if instance.__dict__.get("_monarch_stopped") is not None:
                return  # already failed and reported once
            handled = False
            reason = f"unhandled {event}"
            if handler is not None:
                try:
                    handled = handler(event) is True
                except BaseException:  # noqa: BLE001 - the owner fails
                    reason = f"__supervise__ raised on {event}:\n{traceback.format_exc()}"
            if handled:
                return
            instance.__dict__["_monarch_stopped"] = reason
            replies.fail_outstanding(instance, reason)
        finally:
            lock.release()
    sys.stderr.write(f"monarch: actor {info.get('mesh')}[{info.get('rank')}] failed: {reason}\n")
    sys.stderr.flush()
    owner_port = info.get("owner_port")
    if owner_port is not None:
        actors().escalate(owner_port[0], int(owner_port[1]), str(info.get("mesh")),
                          int(info.get("rank", -1)), reason)
