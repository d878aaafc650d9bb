"""The Python actor worker: a proc of a Python actor mesh (docs/python.md, "Actors").

Started by the runtime's local launcher through a tiny launcher script
(``python3 -u .../monarch/_worker.py``). As ``__main__`` it installs a lazy
``monarch`` package -- the package's ``__init__`` imports torch (1.7 s), which
an actor that never touches torch should not pay for -- then imports
``monarch._actors`` (registering the C++ actor class "monarch.PythonActor")
and serves through the C++ worker main, ``monarch::runWorker()``.

Imported as ``monarch._worker`` it is what "monarch.PythonActor" calls, with
the GIL held, from the runtime's actor threads: :func:`construct` (spawn) and
:func:`invoke` (every adverb).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import pickle
import sys
import threading
import traceback
from typing import Any, Dict, List, Optional

# Flags of "call" (kept in step with _actor_mesh.py).
FLAG_NO_REPLY = 1


class WorkerError(RuntimeError):
    """Raised back into C++: its str() is the message the caller sees."""


# -- the actor's context ------------------------------------------------------

_current: contextvars.ContextVar[Optional[Dict[str, Any]]] = contextvars.ContextVar(
    "monarch_actor_context", default=None
)
_current_instance: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "monarch_actor_instance", default=None
)
# The actors of this process by actor mesh name (call_actor finds them).
_local_actors: Dict[str, Any] = {}
_loop_local = threading.local()


def current_context() -> Optional[Dict[str, Any]]:
    """{"mesh", "rank", "point", "sizes", "proc_rank"} of the running actor."""
    return _current.get()


def current_instance() -> Any:
    """The actor whose constructor or endpoint runs in this context (the owner
    of the proc and actor meshes it spawns), or None."""
    return _current_instance.get()


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
    out-of-band buffers...] (see _actor_mesh.spawn)."""
    try:
        from . import _actor_mesh as am

        header = pickle.loads(memoryview(frames[0]))
        for entry in header.get("sys_path", []):
            if entry not in sys.path:
                sys.path.append(entry)
        cls, args, kwargs = am.loads(frames[1:])
        info = _context_info(header, ctx)
        info["owner_port"] = header.get("owner_port")
        instance = cls.__new__(cls)
        # One lock per actor: endpoints (runtime threads) and __supervise__
        # (the supervision thread) never run at the same time.
        instance.__dict__["_monarch_lock"] = threading.RLock()
        instance.__dict__["_monarch_context"] = info
        token = _current.set(info)
        itoken = _current_instance.set(instance)
        try:
            with instance.__dict__["_monarch_lock"]:
                instance.__init__(*args, **kwargs)
        finally:
            _current_instance.reset(itoken)
            _current.reset(token)
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
    from . import _actor_mesh as am

    info = instance.__dict__.get("_monarch_context") or {}
    token = _current.set(info)
    itoken = _current_instance.set(instance)
    lock = instance.__dict__["_monarch_lock"]
    lock.acquire()
    try:
        stopped = instance.__dict__.get("_monarch_stopped")
        if stopped is not None:
            if flags & FLAG_NO_REPLY:
                return []
            return am.dumps(("stopped", info.get("mesh"), info.get("rank"), stopped))
        args, kwargs = am.loads(frames)
        fn = am.endpoint_function(type(instance), method)
        result = fn(instance, *args, **kwargs)
        if asyncio.iscoroutine(result):
            result = _loop().run_until_complete(result)
        if flags & FLAG_NO_REPLY:
            return []
        return am.dumps(("ok", result))
    except BaseException as e:  # noqa: BLE001 - everything goes to the caller
        tb = traceback.format_exc()
        where = f"{info.get('mesh')}[{info.get('rank')}].{method}"
        if flags & FLAG_NO_REPLY:
            raise WorkerError(f"endpoint {where} raised:\n{tb}") from None
        try:
            return am.dumps(("err", e, tb, where))
        except Exception:  # the exception itself does not pickle
            return am.dumps(("err", None, tb, where))
    finally:
        lock.release()
        _current_instance.reset(itoken)
        _current.reset(token)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass


def call_actor(mesh: str, endpoint: str, args: List[Any]) -> List[Any]:
    """The rref adverb on a Python tensor worker: the executor calls the
    endpoint of this process's actor of ``mesh`` with the local shards (on its
    stream thread); the tensors returned become the results' shards."""
    from . import _actor_mesh as am
    from . import _remote_exec

    instance = _local_actors.get(mesh)
    if instance is None:
        raise RuntimeError(f"no actor of mesh '{mesh}' in this process")
    info = instance.__dict__.get("_monarch_context") or {}
    token = _current.set(info)
    itoken = _current_instance.set(instance)
    try:
        with instance.__dict__["_monarch_lock"]:
            stopped = instance.__dict__.get("_monarch_stopped")
            if stopped is not None:
                raise RuntimeError(f"actor {mesh}[{info.get('rank')}] is stopped: {stopped}")
            # "python-meta:<endpoint>": the probe of propagate="cached".
            meta = endpoint.startswith(_remote_exec.META_PREFIX)
            name = endpoint[len(_remote_exec.META_PREFIX):] if meta else endpoint
            fn = am.endpoint_function(type(instance), name)
            out = fn(instance, *args)
            if asyncio.iscoroutine(out):
                out = _loop().run_until_complete(out)
        single, tensors = _remote_exec._flatten(out, f"endpoint {mesh}.{name}")
        return [_remote_exec.encode_meta(single, tensors)] if meta else tensors
    finally:
        _current_instance.reset(itoken)
        _current.reset(token)


def supervise(instance: Any, event: Any) -> None:
    """Runs the owner's ``__supervise__(event)`` (under the actor's lock, in its
    context). Unless it returns True the owner fails: its endpoints answer
    with a supervision error from now on and the event goes up to its own
    owner (the controller or another actor) as a failure of this actor."""
    info = instance.__dict__.get("_monarch_context") or {}
    handler = getattr(instance, "__supervise__", None)
    token = _current.set(info)
    itoken = _current_instance.set(instance)
    try:
        with instance.__dict__["_monarch_lock"]:
            if instance.__dict__.get("_monarch_stopped") is not None:
                return  # already failed and reported once
            handled = False
            reason = f"unhandled {event}"
            if handler is not None:
                try:
                    handled = handler(event) is True
                except BaseException:  # noqa: BLE001 - the owner fails
                    reason = _format_error(f"__supervise__ raised on {event}:")
            if handled:
                return
            instance.__dict__["_monarch_stopped"] = reason
    finally:
        _current_instance.reset(itoken)
        _current.reset(token)
    sys.stderr.write(f"monarch: actor {info.get('mesh')}[{info.get('rank')}] failed: {reason}\n")
    sys.stderr.flush()
    owner_port = info.get("owner_port")
    if owner_port is not None:
        from . import _actors  # type: ignore[attr-defined]

        _actors.escalate(owner_port[0], int(owner_port[1]), str(info.get("mesh")),
                         int(info.get("rank", -1)), reason)


# -- running as the worker process ------------------------------------------

def _install_lazy_package(root: str) -> None:
    """Registers ``monarch`` without running its ``__init__`` (torch): the
    first attribute that is not a submodule runs the real ``__init__``."""
    import importlib
    import importlib.util

    pkg_dir = os.path.join(root, "monarch")
    spec = importlib.util.spec_from_file_location(
        "monarch", os.path.join(pkg_dir, "__init__.py"), submodule_search_locations=[pkg_dir]
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    state = {"loaded": False}

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            if importlib.util.find_spec(f"monarch.{name}") is not None:
                return importlib.import_module(f"monarch.{name}")
        except ImportError:
            pass
        if not state["loaded"]:
            state["loaded"] = True
            del mod.__dict__["__getattr__"]
            spec.loader.exec_module(mod)  # type: ignore[union-attr]
            return getattr(mod, name)
        raise AttributeError(f"module 'monarch' has no attribute '{name}'")

    mod.__dict__["__getattr__"] = __getattr__
    sys.modules["monarch"] = mod


def _serve() -> int:
    root = os.environ.get("MONARCH_PYTHON_ROOT") or os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))
    )
    # sys.path[0] is this script's directory (inside the package): drop it.
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != here]
    if root not in sys.path:
        sys.path.insert(0, root)
    for entry in os.environ.get("MONARCH_PYTHON_PATH", "").split(os.pathsep):
        if entry and entry not in sys.path and os.path.realpath(entry) != here:
            sys.path.append(entry)
    _install_lazy_package(root)
    if os.environ.get("MONARCH_WORKER_KIND") == "tensor":
        # The C++ TensorWorker in this process, able to run Python functions.
        import torch  # noqa: F401  (before the extension: it links libtorch_python)

        from monarch import _tensor_worker  # type: ignore[attr-defined]  # noqa: F401
    from monarch import _actors  # type: ignore[attr-defined]

    if not _actors.is_worker_process():
        print("monarch._worker: start it through spawn (no bootstrap)", file=sys.stderr)
        return 2
    return _actors.run_worker()


if __name__ == "__main__":
    sys.exit(_serve())
