"""The Python half of an actor worker: what the C++ actor class
"monarch.PythonActor" (frontend/csrc/Actors.cpp) calls, with the GIL held,
from the runtime's actor threads -- :func:`construct` (spawn) and :func:`invoke`
(every adverb). On Python tensor workers the ``rref`` adverb reaches the
actors through :func:`local_actor` and :func:`run_in`.
The process itself is started by ``monarch/_src/bootstrap.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import pickle
import sys
import threading
import traceback
from typing import Any, Dict, List

from ..common import pickling
from ..common.errors import SupervisionError
from ..mesh.view import Dim, MeshView
from . import context, controller_port, replies
from .actor import endpoint_function, endpoint_takes_port
from .extension import actors

# Flags of "call" (kept in step with actor_mesh.py).
FLAG_NO_REPLY = 1
# The frames are (args, kwargs, port): the result goes to that Port
# (``send(endpoint, ..., port=port)``, actor_mesh.py), an exception too.
FLAG_TO_PORT = 2
# The frames end with the slice the message went to: (offset, ((name, size,
# stride), ...)) over the procs' ranks; message_rank is the point in it.
FLAG_SLICED = 4
# The method answers through a Port it takes after self, though it is not
# declared so (``as_endpoint(mesh.method, explicit_response_port=True)``).
FLAG_PORT_ARG = 8
# An adverb's call of an endpoint that answers through a Port: the last frame
# is (addr, port) of the call's reply channel, where everything this actor
# answers for the call goes (replies.py); the reply here only says which rank
# ran it.
FLAG_REPLY_PORT = replies.FLAG_REPLY_PORT


class WorkerError(RuntimeError):
    """Raised back into C++: its str() is the message the caller sees."""


# The actors of this process by actor mesh name (call_actor finds them).
_local_actors: Dict[str, Any] = {}
_loop_local = threading.local()
# What a message to (class, endpoint) runs, looked up once (endpoint_function).
_endpoint_functions: Dict[Any, Any] = {}


def _loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_loop_local, "loop", None)
    if loop is None:
        loop = asyncio.new_event_loop()
        _loop_local.loop = loop
    return loop


def _format_error(what: str) -> str:
    return f"{what}\n{traceback.format_exc()}"


class Anchor:
    """The actor spawned on every proc of a mesh the first time a reference
    to the mesh is made: its "where" (C++) tells where each proc listens."""


class FailedActor:
    """What a rank holds when its actor's constructor raised: every call is
    answered with a supervision error (the event went to the owner)."""


def construct(frames: List[Any], ctx: Dict[str, Any]) -> Any:
    """Makes the Python actor: frames are [header, (cls, args, kwargs) pickle,
    out-of-band buffers...] (see actor_mesh.spawn).

    A constructor that raises does not fail the spawn (Monarch's rule): the
    rank holds a :class:`FailedActor` and a supervision event goes to the
    owner of the mesh; calls to the rank raise SupervisionError."""
    info: Dict[str, Any] = {"mesh": ctx.get("mesh"), "rank": ctx.get("rank")}
    instance: Any = None
    try:
        header = pickle.loads(memoryview(frames[0]))
        for entry in header.get("sys_path", []):
            if entry not in sys.path:
                sys.path.append(entry)
        level = header.get("log_level")
        if isinstance(level, int):
            logging.getLogger().setLevel(level)
        controller_port.inherit(header.get("controllers"))
        info = _context_info(header, ctx)
        info["owner_port"] = header.get("owner_port")
        cls, args, kwargs = pickling.loads(frames[1:])
        instance = cls.__new__(cls)
        # One lock per actor: endpoints and __supervise__ (the supervision
        # thread) never run at the same time.
        instance.__dict__["_monarch_lock"] = threading.RLock()
        instance.__dict__["_monarch_context"] = info
        with context.entered(instance, info):
            with instance.__dict__["_monarch_lock"]:
                instance.__init__(*args, **kwargs)
        _local_actors[str(info["mesh"])] = instance
        return instance
    except BaseException:  # noqa: BLE001 - every failure is a supervision event
        reason = _format_error(f"constructor of actor {info.get('mesh')}[{info.get('rank')}] "
                               "raised:")
    failed = FailedActor()
    failed.__dict__.update(_monarch_lock=threading.RLock(), _monarch_context=info,
                           _monarch_stopped=reason)
    _report_failure(info, reason)
    return failed


def _report_failure(info: Dict[str, Any], reason: str) -> None:
    """Tells the owner of the actor's mesh that this rank failed (it runs the
    owner's ``__supervise__``, or the controller's ``unhandled_fault_hook``)."""
    sys.stderr.write(f"monarch: actor {info.get('mesh')}[{info.get('rank')}] failed: {reason}\n")
    owner_port = info.get("owner_port")
    if owner_port is None:
        return
    try:
        actors().escalate(owner_port[0], int(owner_port[1]), str(info.get("mesh")),
                          int(info.get("rank", -1)), reason)
    except Exception as e:  # noqa: BLE001 - the owner is gone: nobody to tell
        sys.stderr.write(f"monarch: reporting the failure of {info.get('mesh')}: {e}\n")


def _coords(index: int, sizes: List[int]) -> List[int]:
    """The row-major coordinates of position ``index`` in a box of ``sizes``."""
    coords = []
    for size in reversed(sizes):
        coords.append(index % size if size else 0)
        index = index // size if size else 0
    coords.reverse()
    return coords


def _context_info(header: Dict[str, Any], ctx: Dict[str, Any]) -> Dict[str, Any]:
    names: List[str] = header.get("names", [])
    sizes: List[int] = header.get("sizes", [])
    ranks: List[int] = header.get("ranks", [])
    proc_rank = int(ctx.get("proc_rank", 0))
    index = ranks.index(proc_rank) if proc_rank in ranks else int(ctx.get("rank", 0))
    return {
        "mesh": header.get("mesh", ctx.get("mesh")),
        "rank": index,
        "point": dict(zip(names, _coords(index, sizes))),
        "sizes": dict(zip(names, sizes)),
        "proc_rank": proc_rank,
    }


def invoke(instance: Any, method: str, frames: List[Any], flags: int) -> List[Any]:
    """Runs one endpoint; returns the frames of ("ok", value) or, for an
    exception, of ("err", exception-or-None, traceback text). With
    FLAG_NO_REPLY (broadcast) an exception is raised instead, which stops the
    actor and reports it to its owner (supervision). A BaseException that is
    not an Exception (Monarch's way to fail an actor on purpose) stops the
    actor whatever the adverb: the owner gets the event and the caller a
    supervision error. With FLAG_REPLY_PORT every answer goes to the call's
    reply channel instead (replies.py) and the reply is ("deferred", rank).
    When the actor stops, the reply ports it holds unanswered answer with its
    failure."""
    info = instance.__dict__.get("_monarch_context") or {}
    lock = instance.__dict__["_monarch_lock"]
    reply_to = None
    with context.entered(instance, info):
        lock.acquire()
        try:
            if flags & FLAG_REPLY_PORT:  # first: whatever fails next is answered there
                reply_to = replies.ReplyTo(frames[-1], info, method)
                frames = frames[:-1]
            stopped = instance.__dict__.get("_monarch_stopped")
            if method in _INTERNAL:
                return _INTERNAL[method](instance, frames, flags)
            payload = pickling.loads(frames)
            if flags & FLAG_SLICED:  # the slice the message went to, last
                message = _message_entry(payload[-1], info)
                payload = payload[:-1]
            else:
                message = None
            args, kwargs = payload[0], payload[1]
            port = payload[2] if flags & FLAG_TO_PORT else None
            if stopped is not None:
                if port is not None:  # its receiver must not wait forever
                    port.exception(SupervisionError(
                        f"supervision: actor {info.get('mesh')}[{info.get('rank')}] is stopped: "
                        f"{stopped}", str(info.get("mesh")), int(info.get("rank", -1))))
                if reply_to is not None:
                    reply_to.stopped(stopped)
                    return reply_to.deferred()
                if flags & FLAG_NO_REPLY:
                    return []
                return pickling.dumps(("stopped", info.get("mesh"), info.get("rank"), stopped))
            key = (type(instance), method)
            found = _endpoint_functions.get(key)
            if found is None:
                found = _endpoint_functions[key] = (endpoint_function(*key),
                                                    endpoint_takes_port(*key))
            fn, takes_port = found
            takes_port = takes_port or bool(flags & FLAG_PORT_ARG)
            with context.entered(instance, dict(info, message=message)) if message \
                    else _NOT_SLICED:
                if port is not None:  # its messages say which actor sent them
                    port = port._as_rank(int(info.get("rank", 0)))
                    return _invoke_to_port(instance, fn, takes_port, port, args, kwargs)
                if reply_to is not None:  # an adverb's call answered through a port
                    return _invoke_deferred(instance, fn, takes_port, reply_to, args, kwargs)
                if takes_port:  # broadcast, or send() without a port: nobody waits
                    _run(fn(instance, _DroppingPort(), *args, **kwargs))
                    result = None
                else:
                    result = _run(fn(instance, *args, **kwargs))
            if flags & FLAG_NO_REPLY:
                return []
            return pickling.dumps(("ok", result))
        except Exception as e:  # noqa: BLE001 - everything goes to the caller
            tb = traceback.format_exc()
            where = f"{info.get('mesh')}[{info.get('rank')}].{method}"
            if reply_to is not None:
                reply_to.error(e, tb)
                return reply_to.deferred()
            if flags & FLAG_NO_REPLY:  # the runtime stops the actor
                reason = f"endpoint {where} raised:\n{tb}"
                replies.fail_outstanding(instance, reason)
                raise WorkerError(reason) from None
            try:
                return pickling.dumps(("err", e, tb, where))
            except Exception:  # the exception itself does not pickle
                return pickling.dumps(("err", None, tb, where))
        except BaseException:  # noqa: BLE001 - not an Exception: the actor fails
            where = f"{info.get('mesh')}[{info.get('rank')}].{method}"
            reason = f"endpoint {where} raised:\n{traceback.format_exc()}"
            replies.fail_outstanding(instance, reason)
            if flags & FLAG_NO_REPLY:
                raise WorkerError(reason) from None
            instance.__dict__["_monarch_stopped"] = reason
            _report_failure(info, reason)
            if reply_to is not None:
                reply_to.stopped(reason)
                return reply_to.deferred()
            return pickling.dumps(("stopped", info.get("mesh"), info.get("rank"), reason))
        finally:
            lock.release()
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                pass


def idle(instance: Any, wake_fd: int) -> None:
    """Between messages, on the actor's thread (the C++ actor's idle()): the
    actor's event loop runs its pending asyncio tasks -- those an endpoint
    started with ``asyncio.create_task`` and left running, as in Monarch --
    until ``wake_fd`` is readable (a message came), or supervision needs the
    actor (``_monarch_interrupt_idle``: the tasks then wait for the next
    message). Without pending tasks it returns at once. The tasks run as the
    actor (its context, its lock)."""
    loop = getattr(_loop_local, "loop", None)
    if loop is None or loop.is_closed():
        return
    if not any(not t.done() for t in asyncio.all_tasks(loop)):
        return
    info = instance.__dict__.get("_monarch_context") or {}
    woken = loop.create_future()

    def on_wake() -> None:
        try:
            while os.read(wake_fd, 4096):
                pass
        except BlockingIOError:
            pass
        if not woken.done():
            woken.set_result(None)

    def interrupt() -> None:  # supervision (another thread) needs the lock
        loop.call_soon_threadsafe(lambda: woken.done() or woken.set_result(None))

    loop.add_reader(wake_fd, on_wake)
    try:
        with context.entered(instance, info), instance.__dict__["_monarch_lock"]:
            instance.__dict__["_monarch_interrupt_idle"] = interrupt
            try:
                loop.run_until_complete(woken)
            finally:
                instance.__dict__.pop("_monarch_interrupt_idle", None)
    finally:
        loop.remove_reader(wake_fd)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass


_NOT_SLICED = contextlib.nullcontext()
# {slice: {proc rank: the context's "message" entry}}, bounded.
_message_entries: Dict[Any, Dict[int, Any]] = {}


def _message_entry(view: Any, info: Dict[str, Any]) -> Dict[str, Any]:
    """The context's "message" entry (current.py) for a message to the slice
    ``view``: this actor's point in it and the slice's sizes."""
    per_rank = _message_entries.get(view)
    proc_rank = int(info.get("proc_rank", 0))
    if per_rank is not None and proc_rank in per_rank:
        return per_rank[proc_rank]
    offset, dims = view
    names = [d[0] for d in dims]
    sizes = [int(d[1]) for d in dims]
    ranks = MeshView.create(offset, [Dim(n, int(z), int(st)) for n, z, st in dims]).ranks()
    index = ranks.index(proc_rank) if proc_rank in ranks else 0
    entry = {"point": dict(zip(names, _coords(index, sizes))), "sizes": dict(zip(names, sizes))}
    if len(_message_entries) > 1024:
        _message_entries.clear()
    _message_entries.setdefault(view, {})[proc_rank] = entry
    return entry


def _run(result: Any) -> Any:
    """An endpoint's result; a coroutine is run to completion first."""
    if result is not None and asyncio.iscoroutine(result):
        return _loop().run_until_complete(result)
    return result


def _invoke_to_port(instance: Any, fn: Any, takes_port: bool, port: Any,
                    args: Any, kwargs: Any) -> List[Any]:
    """``send(endpoint, args, kwargs, port=port)``: the endpoint's result, or
    its exception, goes to ``port``; nothing is replied."""
    try:
        if takes_port:
            _run(fn(instance, port, *args, **kwargs))
        else:
            port.send(_run(fn(instance, *args, **kwargs)))
    except Exception as e:  # noqa: BLE001 - the port's receiver gets it
        port.exception(e)
    return []


def _invoke_deferred(instance: Any, fn: Any, takes_port: bool, reply: Any,
                     args: Any, kwargs: Any) -> List[Any]:
    """An adverb's call of an endpoint that answers through a port: it gets
    an AdverbPort of the call's reply channel and answers on it when it
    likes -- now, or later from any thread (replies.py). An exception is the
    answer unless it had answered already; a BaseException goes up (invoke
    stops the actor, which answers the port with its failure)."""
    port = reply.port(instance) if takes_port else None
    try:
        if takes_port:
            _run(fn(instance, port, *args, **kwargs))
        else:  # FLAG_REPLY_PORT without a port to hand: its result is the answer
            reply.send(_run(fn(instance, *args, **kwargs)))
    except Exception as e:  # noqa: BLE001 - the caller gets it
        reply.error(e, traceback.format_exc())
    # No reference kept by the endpoint: the port is dropped here, unanswered,
    # and its caller is told so (replies._tell_drops).
    del port
    reply.returned()
    return reply.deferred()


class _DroppingPort:
    """The Port an ``explicit_response_port`` endpoint gets when nobody waits
    for its answer (``broadcast``, ``send`` without a port), as Monarch's
    DroppingPort: what it sends is dropped; an exception sent on it is raised
    (in the endpoint: the actor stops, as a broadcast that raised does)."""

    def send(self, obj: Any) -> None:
        pass

    def exception(self, obj: BaseException) -> None:
        if not isinstance(obj, BaseException):
            raise TypeError(f"Port.exception takes an exception, got {obj!r}")
        raise obj

    def __reduce__(self) -> Any:
        raise TypeError("the port of a broadcast has nobody to answer: it cannot be passed on "
                        "(use send(endpoint, ..., port=...) with a Channel's port)")


def _stop(instance: Any, frames: List[Any], flags: int) -> List[Any]:
    """ActorMesh.stop(): the actor answers every later call as stopped."""
    instance.__dict__.setdefault("_monarch_stopped", "stopped by ActorMesh.stop()")
    replies.fail_outstanding(instance, instance.__dict__["_monarch_stopped"])
    _local_actors.pop(str((instance.__dict__.get("_monarch_context") or {}).get("mesh")), None)
    return [] if flags & FLAG_NO_REPLY else pickling.dumps(("ok", None))


def _log_level(instance: Any, frames: List[Any], flags: int) -> List[Any]:
    """ProcMesh.logging_option(level=...): this worker's root logger level."""
    (level,), _ = pickling.loads(frames)
    logging.getLogger().setLevel(int(level))
    return [] if flags & FLAG_NO_REPLY else pickling.dumps(("ok", None))


# The tensor layer's half of rref from native tensor workers: a plug-in found
# by module name (as tensor_engine.py finds the engine), since this layer
# never imports the tensor one and an actor that is never called so never
# imports torch.
RREF_MODULE = "monarch._src.tensor.remote_exec"


def _rref(instance: Any, frames: List[Any], flags: int) -> List[Any]:
    """rref from the native tensor worker of this actor's rank: frames and
    reply are plan messages (``remote_exec.serve_actor_call``), not pickles.
    A stopped actor answers with an error (``run_in`` refuses it)."""
    info = instance.__dict__.get("_monarch_context") or {}

    def fatal(reason: str) -> None:
        instance.__dict__["_monarch_stopped"] = reason
        replies.fail_outstanding(instance, reason)
        _report_failure(info, reason)

    return importlib.import_module(RREF_MODULE).serve_actor_call(instance, frames, fatal)


# Calls of the frontend itself, not endpoints (they run on stopped actors too).
_INTERNAL = {"__monarch_stop__": _stop, "__monarch_log_level__": _log_level,
             "__monarch_rref__": _rref}


def local_actor(mesh: str) -> Any:
    """This process's actor of actor mesh ``mesh`` (the rref adverb on a Python
    tensor worker calls its endpoints: monarch._src.tensor.remote_exec)."""
    instance = _local_actors.get(mesh)
    if instance is None:
        raise RuntimeError(f"no actor of mesh '{mesh}' in this process")
    return instance


def run_in(instance: Any, fn: Any, *args: Any) -> Any:
    """Calls ``fn(instance, *args)`` as that actor would run an endpoint: in its
    context, under its lock, refused once it failed; a coroutine is run to
    completion."""
    info = instance.__dict__.get("_monarch_context") or {}
    with context.entered(instance, info):
        with instance.__dict__["_monarch_lock"]:
            stopped = instance.__dict__.get("_monarch_stopped")
            if stopped is not None:
                raise RuntimeError(f"actor {info.get('mesh')}[{info.get('rank')}] is stopped: "
                                   f"{stopped}")
            out = fn(instance, *args)
            if asyncio.iscoroutine(out):
                out = _loop().run_until_complete(out)
            return out
