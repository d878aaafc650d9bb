"""Monarch's ``get_or_spawn_controller(name, ActorClass, *args, **kwargs)``:
one actor per name in the whole program (docs/python.md, "Singleton
controllers").

The controller process keeps the registry. A name asked for the first time
is spawned, as in Monarch, on ``this_proc()`` -- here a child proc of the
controller kept until it is stopped -- and owned by the controller (its
supervision events reach ``unhandled_fault_hook``). Actors ask the
controller: every spawn header carries the address of the controller's
request port (``controller_port``), an actor sends ``(reply port, name,
class, args, kwargs)`` there, and the controller's request thread answers
with the actor mesh, which pickles to a reference to the same actors. So
every caller, controller or actor, gets the one actor mesh of that name.
"""

from __future__ import annotations

import atexit
import pickle
import sys
import threading
from typing import Any, Dict, Optional, Tuple, Type

from ..common.future import Future
from ..common.pickling import dumps_bytes
from ..common.errors import SupervisionError
from . import controller_port
from .actor import Actor
from .host_mesh import this_proc
from .ports import Channel, Port, PortReceiver

_REQUEST_POLL_S = 0.1


class _Entry:
    """One name of the registry: spawned once; later callers wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.mesh: Any = None
        self.error: Optional[BaseException] = None


_lock = threading.Lock()
_entries: Dict[str, _Entry] = {}


def get_or_spawn_controller(name: str, actor_class: Type[Actor], *args: Any,
                            **kwargs: Any) -> "Future[Any]":
    """The actor mesh (one actor) of the singleton ``name``, spawned with
    ``actor_class(*args, **kwargs)`` the first time the program asks for the
    name, from the controller or from any actor; later calls return the same
    actors (their arguments are not used). A Future, as in Monarch."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"get_or_spawn_controller takes the controller's name (a non-empty "
                        f"str), got {name!r}")
    if not isinstance(actor_class, type) or not issubclass(actor_class, Actor):
        raise TypeError(f"get_or_spawn_controller takes an Actor subclass, got "
                        f"{actor_class!r}")
    if controller_port.in_worker():
        return _ask_the_controller(name, actor_class, args, kwargs)
    try:
        return Future.ready(get_or_spawn_here(name, actor_class, args, kwargs))
    except Exception as e:  # noqa: BLE001 - delivered by get(), as Monarch's
        return Future.failed(e)


def get_or_spawn_here(name: str, actor_class: Type[Actor], args: Tuple[Any, ...],
                      kwargs: Dict[str, Any]) -> Any:
    """At the controller: the registry's mesh of ``name``, spawned on
    ``this_proc()`` if the program never asked for it (or its proc was
    stopped since)."""
    with _lock:
        entry = _entries.get(name)
        if entry is not None and entry.done.is_set() and entry.mesh is not None \
                and entry.mesh._state.stopped:
            entry = None  # its proc was stopped (procs.stop(), shutdown_context())
        creator = entry is None
        if entry is None:
            entry = _entries[name] = _Entry()
    if creator:
        try:
            entry.mesh = this_proc().spawn(name, actor_class, *args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - every waiter gets it
            entry.error = e
            with _lock:
                if _entries.get(name) is entry:
                    del _entries[name]  # a failed spawn may be asked for again
        finally:
            entry.done.set()
    else:
        entry.done.wait()
    if entry.error is not None:
        raise entry.error
    mesh = entry.mesh
    try:
        mesh._check_alive()
    except SupervisionError as e:
        raise ValueError(f"Failure on {name}: {e}") from None  # Monarch's words
    return mesh


def forget_all() -> None:
    """Empties the registry (shutdown_context: the actors are stopped)."""
    with _lock:
        _entries.clear()


# -- actors ask the controller ------------------------------------------------------

def _ask_the_controller(name: str, actor_class: Type[Actor], args: Tuple[Any, ...],
                        kwargs: Dict[str, Any]) -> "Future[Any]":
    address = controller_port.inherited()
    if address is None:
        raise RuntimeError(
            f"get_or_spawn_controller({name!r}) in a process that does not know the "
            "controller: its actors were spawned without the controller's request port")
    reply, receiver = Channel.open(once=True)
    payload = dumps_bytes((name, actor_class, args, kwargs))
    Port(address[0], address[1]).send((reply, payload))
    # The receiver must live until the answer came: the future holds it.
    return receiver.recv().then(lambda mesh, _receiver=receiver: mesh)


# -- the controller's request port ----------------------------------------------------

_service: Optional[controller_port.Address] = None
_service_lock = threading.Lock()
_stop = threading.Event()
_thread: Optional[threading.Thread] = None


def _open_service() -> controller_port.Address:
    """Opens the controller's request port and its thread (once)."""
    global _service, _thread
    with _service_lock:
        if _service is None:
            port, receiver = Channel.open()
            _thread = threading.Thread(target=_serve, args=(receiver,), daemon=True,
                                       name="monarch-controllers")
            _thread.start()
            atexit.register(_stop_service)
            _service = (port._addr, port._port)
        return _service


def _stop_service() -> None:
    _stop.set()
    if _thread is not None:
        _thread.join(timeout=2)


def _serve(receiver: PortReceiver[Any]) -> None:
    pending = receiver.recv()
    while not _stop.is_set():
        try:
            request = pending.get(timeout=_REQUEST_POLL_S)
        except TimeoutError:
            continue
        except Exception as e:  # noqa: BLE001 - a bad request must not stop the port
            sys.stderr.write(f"monarch: a get_or_spawn_controller request was dropped: {e}\n")
            pending = receiver.recv()
            continue
        pending = receiver.recv()
        # One thread per request: a singleton's constructor may itself ask
        # for another singleton while this one is being spawned.
        threading.Thread(target=_answer, args=(request,), daemon=True,
                         name="monarch-controller-request").start()


def _answer(request: Any) -> None:
    try:
        reply, payload = request
    except (TypeError, ValueError):
        sys.stderr.write("monarch: a malformed get_or_spawn_controller request was dropped\n")
        return
    try:
        name, actor_class, args, kwargs = pickle.loads(payload)
        reply.send(get_or_spawn_here(name, actor_class, tuple(args), dict(kwargs)))
    except Exception as e:  # noqa: BLE001 - the asking actor gets it
        try:
            reply.exception(e)
        except Exception as again:  # noqa: BLE001 - the asker is gone
            sys.stderr.write(f"monarch: answering get_or_spawn_controller({request!r}): "
                             f"{again}\n")


controller_port.set_opener(_open_service)
