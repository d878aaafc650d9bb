"""The Python half of an actor worker: what the C++ actor class
"monarch.PythonActor" (frontend/csrc/Actors.cpp) calls, with the GIL held,
from the runtime's actor threads -- :func:`construct` (spawn) and :func:`invoke`
(every adverb). On Python tensor workers the ``rref`` adverb reaches the
actors through :func:`local_actor` and :func:`run_in`.
The process itself is started by ``monarch/_src/bootstrap.py``.
"""

from __future__ import annotations

import asyncio
import pickle
import sys
import threading
import traceback
from typing import Any, Dict, List

from ..common import pickling
from . import context
from .actor import endpoint_function

# Flags of "call" (kept in step with actor_mesh.py).
FLAG_NO_REPLY = 1


class WorkerError(RuntimeError):
    """Raised back into C++: its str() is the message the caller sees."""


# The actors of this process by actor mesh name (call_actor finds them).
_local_actors: Dict[str, Any] = {}
_loop_local = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_loop_local, "loop", None)
    if loop is None:
        loop = asyncio.new_event_loop()
        _loop_local.loop = loop
    return loop


def _format_error(what: str) -> str:
    return f"{what}\n{traceback.format_exc()}"


def construct(frames: List[Any], ctx: Dict[str, Any]) -> Any:
    """Makes the Python actor: frames are [header, (cls, args, kwargs) pickle,
    out-of-band buffers...] (see actor_mesh.spawn)."""
    try:
        header = pickle.loads(memoryview(frames[0]))
        for entry in header.get("sys_path", []):
            if entry not in sys.path:
                sys.path.append(entry)
        cls, args, kwargs = pickling.loads(frames[1:])
        info = _context_info(header, ctx)
        info["owner_port"] = header.get("owner_port")
        instance = cls.__new__(cls)
        # One lock per actor: endpoints (runtime threads) and __supervise__
        # (the supervision thread) never run at the same time.
        instance.__dict__["_monarch_lock"] = threading.RLock()
        instance.__dict__["_monarch_context"] = info
        with context.entered(instance, info):
            with instance.__dict__["_monarch_lock"]:
                instance.__init__(*args, **kwargs)
        _local_actors[str(info["mesh"])] = instance
        return instance
    except BaseException:
        raise WorkerError(
            _format_error(f"constructor of actor {ctx.get('mesh')}[{ctx.get('rank')}] raised:")
        ) from None


def _context_info(header: Dict[str, Any], ctx: Dict[str, Any]) -> Dict[str, Any]:
    names: List[str] = header.get("names", [])
    sizes: List[int] = header.get("sizes", [])
    ranks: List[int] = header.get("ranks", [])
    proc_rank = int(ctx.get("proc_rank", 0))
    index = ranks.index(proc_rank) if proc_rank in ranks else int(ctx.get("rank", 0))
    coords = []
    rest = index
    for size in reversed(sizes):
        coords.append(rest % size if size else 0)
        rest = rest // size if size else 0
    coords.reverse()
    return {
        "mesh": header.get("mesh", ctx.get("mesh")),
        "rank": index,
        "point": dict(zip(names, coords)),
        "sizes": dict(zip(names, sizes)),
        "proc_rank": proc_rank,
    }


def invoke(instance: Any, method: str, frames: List[Any], flags: int) -> List[Any]:
    """Runs one endpoint; returns the frames of ("ok", value) or, for an
    exception, of ("err", exception-or-None, traceback text). With
    FLAG_NO_REPLY (broadcast) an exception is raised instead, which stops the
    actor and reports it to its owner (supervision)."""
    info = instance.__dict__.get("_monarch_context") or {}
    lock = instance.__dict__["_monarch_lock"]
    with context.entered(instance, info):
        lock.acquire()
        try:
            stopped = instance.__dict__.get("_monarch_stopped")
            if stopped is not None:
                if flags & FLAG_NO_REPLY:
                    return []
                return pickling.dumps(("stopped", info.get("mesh"), info.get("rank"), stopped))
            args, kwargs = pickling.loads(frames)
            fn = endpoint_function(type(instance), method)
            result = fn(instance, *args, **kwargs)
            if asyncio.iscoroutine(result):
                result = _loop().run_until_complete(result)
            if flags & FLAG_NO_REPLY:
                return []
            return pickling.dumps(("ok", result))
        except BaseException as e:  # noqa: BLE001 - everything goes to the caller
            tb = traceback.format_exc()
            where = f"{info.get('mesh')}[{info.get('rank')}].{method}"
            if flags & FLAG_NO_REPLY:
                raise WorkerError(f"endpoint {where} raised:\n{tb}") from None
            try:
                return pickling.dumps(("err", e, tb, where))
            except Exception:  # the exception itself does not pickle
                return pickling.dumps(("err", None, tb, where))
        finally:
            lock.release()
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                pass


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
