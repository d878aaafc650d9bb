"""Python actors on the C++ runtime: actor meshes, endpoints, adverbs, futures.

The controller half of ``monarch.actor``'s actors (docs/python.md, "Actors").
A proc mesh's actors live in a second set of worker processes -- Python ones,
``monarch/_worker.py`` -- spawned through ``monarch._actors`` the first time an
actor is spawned on any view of the mesh, with the same shape and ranks. Each
actor is the C++ actor class "monarch.PythonActor" holding a Python object;
every adverb is its endpoint "call" carrying (endpoint name, frames).

Values travel as frames: a pickle (protocol 5) and its out-of-band buffers,
each one raw payload frame on the wire (large CPU tensors are reduced to such a
buffer, not copied into the pickle). This module imports neither torch nor the
tensor frontend: workers import it.
"""

from __future__ import annotations

import asyncio
import atexit
import io
import os
import pickle
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ._errors import SupervisionError as _BaseSupervisionError
from ._mesh_view import MeshView

FLAG_NO_REPLY = 1  # kept in step with _worker.py
_TENSOR_FRAME_MIN = 64 * 1024  # tensors at least this big travel as raw frames
_FOREVER_MS = 10**9


# -- errors ---------------------------------------------------------------------

class ActorError(Exception):
    """An endpoint raised on an actor: the remote exception (``.exception``,
    None if it did not pickle) and its traceback text (``.traceback``)."""

    def __init__(self, where: str, exception: Optional[BaseException], remote_traceback: str):
        self.where = where
        self.exception = exception
        self.traceback = remote_traceback
        super().__init__(f"actor {where} raised:\n{remote_traceback.rstrip()}")

    def __reduce__(self):  # pragma: no cover - pickling of the error itself
        return (ActorError, (self.where, self.exception, self.traceback))


class SupervisionError(_BaseSupervisionError):
    """A proc or actor of an actor mesh failed (the process died, or an actor
    stopped after a broadcast raised); names the mesh and the rank."""

    def __init__(self, message: str, mesh: str = "", rank: int = -1):
        self.mesh = mesh
        self.rank = rank
        self.worker_message = message
        RuntimeError.__init__(self, message)


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


_WHERE = re.compile(r"^([^\[\s]+)\[(\d+)\]")
# A call to a rank already known to have failed (ActorMeshState::checkRanks).
_FAILED_RANK = re.compile(r"^actor mesh '([^']+)' rank (\d+) failed")


def _raise_status(code: str, message: str, endpoint: str) -> None:
    m = _WHERE.match(message) or _FAILED_RANK.match(message)
    mesh, rank = (m.group(1), int(m.group(2))) if m else ("", -1)
    if code in ("Supervision", "Closed"):
        raise SupervisionError(f"supervision: {message}", mesh, rank)
    if code == "Timeout":
        raise TimeoutError(message)
    raise ActorError(f"{mesh}[{rank}].{endpoint}" if m else endpoint, None,
                     f"{code}: {message}")


# -- pickling with raw frames ----------------------------------------------------

def _rebuild_tensor(buf: Any, dtype: Any, shape: Tuple[int, ...]) -> Any:
    import torch

    flat = torch.frombuffer(bytearray(buf), dtype=torch.uint8)
    return flat.view(dtype).reshape(shape)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:  # noqa: D401
        torch = sys.modules.get("torch")
        if torch is not None and type(obj) is torch.Tensor:
            t = obj
            if (t.device.type == "cpu" and t.layout == torch.strided and not t.requires_grad
                    and t.numel() * t.element_size() >= _TENSOR_FRAME_MIN):
                raw = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
                return _rebuild_tensor, (pickle.PickleBuffer(raw), t.dtype, tuple(t.shape))
        return NotImplemented


def dumps(obj: Any) -> List[Any]:
    """[pickle, out-of-band buffers...]: each becomes one frame."""
    buffers: List[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return [out.getbuffer()] + [b.raw() for b in buffers]


def loads(frames: Sequence[Any]) -> Any:
    return pickle.loads(memoryview(frames[0]), buffers=[memoryview(f) for f in frames[1:]])


# -- endpoints -------------------------------------------------------------------

class EndpointProperty:
    """What ``@endpoint`` makes of a method: the function on the actor,
    an :class:`Endpoint` (with the adverbs) on an actor mesh."""

    def __init__(self, fn: Callable, propagate: Any = None):
        self._fn = fn
        self._propagate = propagate
        self.__name__ = getattr(fn, "__name__", "endpoint")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    def __set_name__(self, owner: type, name: str) -> None:
        self.__name__ = name

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return self._fn.__get__(instance, owner)  # on the actor: the method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


def endpoint_names(cls: type) -> List[str]:
    names = []
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if isinstance(value, EndpointProperty) and name not in names:
                names.append(name)
    return names


def endpoint_function(cls: type, name: str) -> Callable:
    for klass in cls.__mro__:
        value = vars(klass).get(name)
        if isinstance(value, EndpointProperty):
            return value._fn
        if value is not None:
            break
    raise AttributeError(f"actor class {cls.__qualname__} has no endpoint '{name}'")


# -- futures ---------------------------------------------------------------------

class Future:
    """The result of an adverb: ``get(timeout)`` (seconds) blocks, ``await``
    waits without blocking the event loop."""

    def __init__(self, handle: Any, convert: Callable[[Any], Any]):
        self._handle = handle
        self._convert = convert
        self._done = False
        self._value: Any = None
        self._error: Optional[BaseException] = None

    def _resolve(self, timeout: Optional[float]) -> bool:
        if self._done:
            return True
        ms = _FOREVER_MS if timeout is None else max(int(timeout * 1000), 0)
        out = self._handle.get(ms)
        if out is None:
            return False
        try:
            self._value = self._convert(out)
        except BaseException as e:  # noqa: BLE001 - delivered by get()
            self._error = e
        self._done = True
        self._handle = None
        return True

    def get(self, timeout: Optional[float] = None) -> Any:
        if not self._resolve(timeout):
            raise TimeoutError(f"no result within {timeout} s (the call is still pending)")
        if self._error is not None:
            raise self._error
        return self._value

    result = get

    def done(self) -> bool:
        return self._done or self._handle.ready()

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        if not self._resolve(timeout):
            raise TimeoutError(f"no result within {timeout} s")
        return self._error

    def __await__(self):
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, self.get).__await__()

    def __repr__(self) -> str:
        return f"<monarch Future {'done' if self._done else 'pending'}>"


class _Ready(Future):
    def __init__(self, value: Any):
        super().__init__(None, lambda x: x)
        self._done = True
        self._value = value

    def done(self) -> bool:
        return True


class _Gathered(Future):
    """Several C++ futures (a view that is not a box of the spawned mesh)."""

    def __init__(self, parts: List[Future], combine: Callable[[List[Any]], Any]):
        super().__init__(None, lambda x: x)
        self._parts = parts
        self._combine = combine

    def _resolve(self, timeout: Optional[float]) -> bool:
        if self._done:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        values = []
        for part in self._parts:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not part._resolve(left):
                return False
            if part._error is not None:
                self._error = part._error
                self._done = True
                return True
            values.append(part._value)
        self._value = self._combine(values)
        self._done = True
        return True

    def done(self) -> bool:
        return self._done or all(p.done() for p in self._parts)


def _unpack_reply(frames: List[Any], endpoint: str) -> Any:
    reply = loads(frames)
    if reply[0] == "ok":
        return reply[1]
    if reply[0] == "stopped":  # the actor failed an unhandled supervision event
        _, mesh, rank, reason = reply
        raise SupervisionError(f"supervision: actor mesh '{mesh}' rank {rank} failed: {reason}",
                               mesh, rank)
    _, exc, tb, where = reply
    raise ActorError(where, exc, tb)


# -- value meshes ----------------------------------------------------------------

class ValueMesh:
    """One value per rank of the mesh a ``call`` went to."""

    def __init__(self, names: Sequence[str], sizes: Sequence[int], values: List[Any]):
        self._names = list(names)
        self._sizes = list(sizes)
        self._values = list(values)

    @property
    def sizes(self) -> Dict[str, int]:
        return dict(zip(self._names, self._sizes))

    def _index(self, coords: Dict[str, int]) -> int:
        unknown = set(coords) - set(self._names)
        if unknown:
            raise KeyError(f"no dimension {sorted(unknown)} in value mesh of dims {self._names}")
        index = 0
        for name, size in zip(self._names, self._sizes):
            if name not in coords:
                if size != 1:
                    raise KeyError(f"item() needs a coordinate for dimension '{name}' (size {size})")
                c = 0
            else:
                c = int(coords[name])
                if not 0 <= c < size:
                    raise IndexError(f"coordinate {name}={c} out of range (size {size})")
            index = index * size + c
        return index

    def item(self, **coords: int) -> Any:
        return self._values[self._index(coords)]

    def _points(self) -> Iterator[Dict[str, int]]:
        for i in range(len(self._values)):
            rest, point = i, []
            for size in reversed(self._sizes):
                point.append(rest % size)
                rest //= size
            yield dict(zip(self._names, reversed(point)))

    def items(self) -> List[Tuple[Dict[str, int], Any]]:
        return list(zip(self._points(), self._values))

    def values(self) -> List[Any]:
        return list(self._values)

    def __iter__(self) -> Iterator[Tuple[Dict[str, int], Any]]:
        return iter(self.items())

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shape = ", ".join(f"{n}={s}" for n, s in zip(self._names, self._sizes))
        return f"<ValueMesh ({shape}) {self._values!r}>"


# -- actor procs of a proc mesh ---------------------------------------------------

_states: "weakref.WeakKeyDictionary[Any, _ActorProcs]" = weakref.WeakKeyDictionary()
_all_states: List["weakref.ref[_ActorProcs]"] = []
_lock = threading.Lock()
_launchers: Dict[str, str] = {}
_counter = [0]


def _actors_ext() -> Any:
    from . import _actors  # type: ignore[attr-defined]

    return _actors


def _python_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _worker_command(kind: str, python: str = "",
                    pythonpath: Sequence[str] = ()) -> Tuple[str, List[str], Dict[str, str]]:
    """(executable, arguments, environment) of a Python worker: ``kind``
    "actor" (Python actors only) or "tensor" (the C++ TensorWorker plus Python
    actors and remote functions). ``python`` (default: this interpreter) runs
    ``monarch/_worker.py`` from this process's monarch package, with this
    process's ``sys.path`` after ``pythonpath``."""
    root = _python_root()
    script = os.path.join(root, "monarch", "_worker.py")
    main = sys.modules.get("__main__")
    main_file = os.path.abspath(main.__file__) if getattr(main, "__file__", None) else ""
    paths = list(pythonpath) + [p for p in sys.path if p]
    env = {
        "MONARCH_PYTHON_ROOT": root,
        "MONARCH_WORKER_KIND": kind,
        "MONARCH_PYTHON_PATH": os.pathsep.join(paths),
        "MONARCH_MAIN_FILE": main_file,
    }
    return python or sys.executable, ["-u", script], env


def _launcher_path(kind: str = "actor") -> str:
    """A launcher script for a Python worker on this machine (the local
    launcher execs one path, no arguments); see ``_worker_command``."""
    env = os.environ.get("MONARCH_PYTHON_WORKER") if kind == "actor" else None
    if env:
        return env
    if kind not in _launchers:
        # Inside the runtime's private directory, which goes on every exit
        # path (SIGTERM, SIGKILL, a worker's _exit), unlike an atexit hook.
        d = tempfile.mkdtemp(prefix="monarch-pyworker-", dir=_actors_ext().private_dir())
        atexit.register(shutil.rmtree, d, True)  # the script is only exec'd
        path = os.path.join(d, f"monarch-python-{kind}-worker")
        exe, args, exports = _worker_command(kind)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n")
            for k, v in exports.items():
                f.write(f"{k}={shlex.quote(v)}; export {k}\n")
            f.write("exec " + " ".join(shlex.quote(a) for a in [exe] + args) + "\n")
        os.chmod(path, 0o700)
        _launchers[kind] = path

        def cleanup(d: str = d, path: str = path) -> None:
            try:
                os.unlink(path)
                os.rmdir(d)
            except OSError:
                pass

        atexit.register(cleanup)
    return _launchers[kind]


class _ActorProcs:
    """The Python worker processes of one root proc mesh (same shape), owned by
    the actor that spawned them (None: the controller)."""

    def __init__(self, shape: List[Tuple[str, int]], owner: Any = None, session: Any = None,
                 hosts: Any = None):
        _counter[0] += 1
        self.shape = list(shape)
        self.name = f"procs{_counter[0]}"
        if _in_worker():
            self.name = f"procs{_counter[0]}@{os.getpid()}"
        # With Python tensor workers the actors live in the tensor workers'
        # processes (beside their rank's executor: rref); else in their own.
        self.session = session
        if session is not None:
            self.procs = _actors_ext().procs_from_capsule(
                session._backend.procs_capsule(), self.name)
        elif hosts is not None:
            # Across hosts the agents start the workers: no launcher script
            # (it would exist on this machine only), the command itself.
            exe, args, env = _worker_command("actor", hosts.python, hosts.pythonpath)
            self.procs = _actors_ext().spawn_procs(
                [(n, int(s)) for n, s in shape], self.name, exe,
                worker_args=args, worker_env=env, hosts=hosts.capsule)
        else:
            self.procs = _actors_ext().spawn_procs(
                [(n, int(s)) for n, s in shape], self.name, _launcher_path())
        self.stopped = False
        self.names_used: set = set()
        self.owner = owner
        # Actor meshes on these procs whose actors failed an escalated event:
        # {mesh: {rank: reason}}.
        self.failed: Dict[str, Dict[int, str]] = {}
        # rref with propagate="cached": {(actor mesh, endpoint): CachedMeta}.
        self.cached_meta: Dict[Tuple[str, str], Any] = {}
        _by_name[self.name] = weakref.ref(self)
        _start_dispatcher()

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            if self.session is None:  # tensor workers: stopped by the session
                self.procs.stop()


def _in_worker() -> bool:
    return "monarch._worker" in sys.modules and sys.modules["monarch._worker"].current_context() is not None


def _procs_for(proc_mesh: Any) -> _ActorProcs:
    session = proc_mesh._session
    with _lock:
        state = _states.get(session)
        if state is None or state.stopped:
            owner = None
            worker = sys.modules.get("monarch._worker")
            if worker is not None:
                owner = worker.current_instance()
            on_tensor_workers = (getattr(session, "backend_kind", "") == "c"
                                 and getattr(session, "tensor_worker", "") == "python"
                                 and session.has_workers)
            hosts = None
            if getattr(session, "hosts", None) and not on_tensor_workers:
                hosts = session.host_workers()
            state = _ActorProcs([(n, s) for n, s in session.shape], owner,
                                session if on_tensor_workers else None, hosts)
            _states[session] = state
            _all_states.append(weakref.ref(state))
        return state


def stop_actor_procs(proc_mesh: Any) -> None:
    """Stops the actor workers of a root proc mesh (ProcMesh.stop)."""
    with _lock:
        state = _states.pop(proc_mesh._session, None)
    if state is not None:
        state.stop()


@atexit.register
def _stop_all() -> None:
    for ref in _all_states:
        state = ref()
        if state is not None:
            try:
                state.stop()
            except Exception:
                pass


# -- supervision ---------------------------------------------------------------

_by_name: Dict[str, "weakref.ref[_ActorProcs]"] = {}
_dispatcher: Optional[threading.Thread] = None
_dispatcher_stop = threading.Event()


def _start_dispatcher() -> None:
    """One thread per process runs the owners' ``__supervise__`` for the events
    the runtime queues (its hooks run on the io thread and cannot call Python)."""
    global _dispatcher
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
    ext = _actors_ext()
    while not _dispatcher_stop.is_set():
        queued = ext.next_supervision_event(100)
        if queued is None:
            continue
        procs_name, kind, mesh, rank, reason = queued
        try:
            _dispatch(procs_name, kind, SupervisionEvent(mesh, rank, reason, procs_name))
        except BaseException as e:  # noqa: BLE001 - the dispatcher must live on
            sys.stderr.write(f"monarch: handling {mesh}[{rank}] failed: {e!r}\n")


def _dispatch(procs_name: str, kind: str, event: SupervisionEvent) -> None:
    ref = _by_name.get(procs_name)
    state = ref() if ref is not None else None
    if state is None or state.stopped:
        return
    if kind == "escalated":
        with _lock:
            state.failed.setdefault(event.mesh, {})[event.rank] = event.reason
    if state.owner is None:
        from . import actor

        actor.unhandled_fault_hook(event)
        return
    from . import _worker

    _worker.supervise(state.owner, event)


def _box(indices: Sequence[int], sizes: Sequence[int]) -> Optional[List[Tuple[int, int, int]]]:
    """Per-dim (start, stop, step) whose product is exactly `indices` in
    row-major order, or None when the set is not such a box."""
    coords = []
    for i in indices:
        c, rest = [], i
        for size in reversed(sizes):
            c.append(rest % size)
            rest //= size
        coords.append(tuple(reversed(c)))
    ranges = []
    for d in range(len(sizes)):
        values = sorted({c[d] for c in coords})
        step = values[1] - values[0] if len(values) > 1 else 1
        if any(b - a != step for a, b in zip(values, values[1:])):
            return None
        ranges.append((values[0], values[-1] + 1, step))
    expected = []

    def walk(d: int, acc: int) -> None:
        if d == len(sizes):
            expected.append(acc)
            return
        start, stop, step = ranges[d]
        for v in range(start, stop, step):
            walk(d + 1, acc * sizes[d] + v)

    walk(0, 0)
    return ranges if expected == list(indices) else None


def _sliced(handle: Any, shape: List[Tuple[str, int]], ranges: List[Tuple[int, int, int]]) -> Any:
    for (name, size), (start, stop, step) in zip(shape, ranges):
        if (start, stop, step) != (0, size, 1):
            handle = handle.slice(name, start, stop, step)
    return handle


def _main_source() -> Optional[Tuple[str, str]]:
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path:
        return None
    try:
        with open(path) as f:
            return (os.path.abspath(path), f.read())
    except OSError:
        return None


def spawn(proc_mesh: Any, name: str, actor_class: type, *args: Any, **kwargs: Any) -> "ActorMesh":
    """``proc_mesh.spawn(name, ActorClass, *args, **kwargs)``: one actor per proc
    of the view, constructed on its worker before this returns."""
    if not isinstance(actor_class, type):
        raise TypeError(f"spawn takes an Actor subclass, got {actor_class!r}")
    state = _procs_for(proc_mesh)
    view: MeshView = proc_mesh._view
    ranks = view.ranks()
    ranges = _box(ranks, [s for _, s in state.shape])
    if ranges is None:
        raise NotImplementedError(
            f"spawning actors on a view whose ranks {ranks} are not a box of the root mesh")
    procs = _sliced(state.procs, state.shape, ranges)
    payload = dumps((actor_class, args, kwargs))
    # In a worker the controller's __main__ runs as __mp_main__ (an actor
    # spawning actors of the script's classes ships the same source on).
    pickled = bytes(payload[0])
    needs_main = (actor_class.__module__ in ("__main__", "__mp_main__")
                  or b"__main__" in pickled or b"__mp_main__" in pickled)
    addr, port = state.procs.supervision_port()
    header = {
        "mesh": name,
        "owner_port": (addr, port),
        "names": list(view.names),
        "sizes": list(view.sizes),
        "ranks": ranks,
        "sys_path": [p for p in sys.path if p],
        "main": _main_source() if needs_main else None,
    }
    frames = [pickle.dumps(header, protocol=5)] + payload
    handle = procs.spawn(name, frames)
    mesh = ActorMesh(state, name, actor_class, handle, ranks, view)
    mesh._proc_mesh = proc_mesh
    return mesh


# -- actor meshes ----------------------------------------------------------------

class ActorMesh:
    """The actors of one ``spawn``, or a slice of them. ``mesh.endpoint`` is an
    :class:`Endpoint` with the adverbs."""

    def __init__(self, state: _ActorProcs, name: str, actor_class: type, root: Any,
                 root_ranks: List[int], view: MeshView):
        self._state = state
        self._name = name
        self._class = actor_class
        self._root = root  # C++ Actors of the whole spawn
        self._root_shape = [tuple(x) for x in root.shape()]
        self._position = {r: i for i, r in enumerate(root_ranks)}
        self._view = view
        self._targets: Optional[List[Tuple[Any, List[int]]]] = None
        self._endpoints = set(endpoint_names(actor_class))
        self._proc_mesh: Any = None  # the ProcMesh (view) the actors are on

    # -- shape -------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def sizes(self) -> Dict[str, int]:
        return dict(zip(self._view.names, self._view.sizes))

    extent = sizes

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(self._view.names)

    def size(self, dims: Any = None) -> int:
        return self._view.size(dims)

    def __len__(self) -> int:
        return self._view.size()

    def slice(self, **coords: Any) -> "ActorMesh":
        view = self._view.slice(**coords)
        mesh = ActorMesh.__new__(ActorMesh)
        mesh.__dict__.update(self.__dict__)
        mesh._view = view
        mesh._targets = None
        if self._proc_mesh is not None:
            mesh._proc_mesh = self._proc_mesh.slice(**coords)
        return mesh

    def __getattr__(self, name: str) -> "Endpoint":
        if name.startswith("_") and not name.startswith("__"):
            pass
        endpoints = self.__dict__.get("_endpoints", set())
        if name in endpoints:
            return Endpoint(self, name)
        raise AttributeError(
            f"actor mesh '{self.__dict__.get('_name')}' of {getattr(self.__dict__.get('_class'), '__qualname__', '?')} "
            f"has no endpoint '{name}'")

    def __repr__(self) -> str:
        return f"<ActorMesh '{self._name}' {self._class.__qualname__} {self._view.shape_string()}>"

    # -- messaging ---------------------------------------------------------------
    def _plan(self) -> List[Tuple[Any, List[int]]]:
        """C++ handles covering this view: one box, else one per rank."""
        if self._targets is None:
            positions = [self._position[r] for r in self._view.ranks()]
            sizes = [s for _, s in self._root_shape]
            ranges = _box(positions, sizes)
            if ranges is not None:
                self._targets = [(_sliced(self._root, self._root_shape, ranges), positions)]
            else:
                targets = []
                for p in positions:
                    single = _box([p], sizes)
                    assert single is not None
                    targets.append((_sliced(self._root, self._root_shape, single), [p]))
                self._targets = targets
        return self._targets

    def _check_alive(self) -> None:
        if self._state.stopped:
            raise SupervisionError(f"actor mesh '{self._name}': its procs were stopped",
                                   self._name, -1)
        failed = self._state.failed.get(self._name)
        if failed:
            for r in self._view.ranks():
                position = self._position[r]
                if position in failed:
                    raise SupervisionError(
                        f"supervision: actor mesh '{self._name}' rank {position} failed: "
                        f"{failed[position]}", self._name, position)


class Endpoint:
    """``mesh.train``: call / call_one / choose / broadcast / stream."""

    def __init__(self, mesh: ActorMesh, name: str):
        self._mesh = mesh
        self._name = name

    def _frames(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> List[Any]:
        self._mesh._check_alive()
        return dumps((args, kwargs))

    def call(self, *args: Any, **kwargs: Any) -> Future:
        """Every actor of the mesh; a Future of a :class:`ValueMesh`."""
        mesh = self._mesh
        frames = self._frames(args, kwargs)
        names, sizes = list(mesh._view.names), list(mesh._view.sizes)
        ep = self._name

        def convert(out: Any) -> List[Any]:
            if out[0] == "err":
                _raise_status(out[1], out[2], ep)
            return [_unpack_reply(v, ep) for v in out[1]]

        parts = [Future(h.call(ep, frames, 0), convert) for h, _ in mesh._plan()]
        if len(parts) == 1:
            part = parts[0]
            part._convert = lambda out: ValueMesh(names, sizes, convert(out))
            return part
        return _Gathered(parts, lambda vals: ValueMesh(names, sizes, [x for v in vals for x in v]))

    def call_one(self, *args: Any, **kwargs: Any) -> Future:
        """The only actor of the mesh (an error if it has more than one)."""
        mesh = self._mesh
        if len(mesh) != 1:
            raise ValueError(
                f"call_one on actor mesh '{mesh._name}' of {len(mesh)} actors; it needs exactly one")
        (handle, _), = mesh._plan()
        return self._one(handle.call_one(self._name, self._frames(args, kwargs), 0))

    def choose(self, *args: Any, **kwargs: Any) -> Future:
        """One live actor of the mesh, round robin."""
        plan = self._mesh._plan()
        frames = self._frames(args, kwargs)
        if len(plan) == 1:
            return self._one(plan[0][0].choose(self._name, frames, 0))
        _counter_choose[0] = (_counter_choose[0] + 1) % len(plan)
        return self._one(plan[_counter_choose[0]][0].choose(self._name, frames, 0))

    def broadcast(self, *args: Any, **kwargs: Any) -> None:
        """Every actor, no reply; an exception stops that actor and is a
        supervision event of the mesh."""
        frames = self._frames(args, kwargs)
        for handle, _ in self._mesh._plan():
            try:
                handle.broadcast(self._name, frames, FLAG_NO_REPLY)
            except RuntimeError as e:
                raise SupervisionError(str(e), self._mesh._name, -1) from None

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """Every actor; yields the values as they arrive."""
        frames = self._frames(args, kwargs)
        futures = [self._one(f) for h, _ in self._mesh._plan()
                   for f in h.stream(self._name, frames, 0)]

        def gen() -> Iterator[Any]:
            pending = list(futures)
            while pending:
                ready = [f for f in pending if f.done()]
                if not ready:
                    pending[0]._resolve(0.005)
                    continue
                for f in ready:
                    pending.remove(f)
                    yield f.get()

        return gen()

    def rref(self, *args: Any, **kwargs: Any) -> Any:
        """Every actor, on distributed tensors: each actor's endpoint gets its
        rank's local shards, in the process of that rank's tensor worker, and
        the tensors it returns form the result (distributed tensors, shapes
        from ``@endpoint(propagate=...)``)."""
        from ._remote import call_distributed

        mesh = self._mesh
        mesh._check_alive()
        if mesh._state.session is None:
            raise NotImplementedError(
                f"rref on '{mesh._name}': its actors are not beside the tensor workers; spawn "
                "them on a mesh made with this_host().spawn_procs(..., tensor_worker='python') "
                "(backend 'c')")
        prop = None
        for klass in mesh._class.__mro__:
            value = vars(klass).get(self._name)
            if isinstance(value, EndpointProperty):
                prop = value._propagate
                break
        if prop is None or (isinstance(prop, str) and prop != "cached"):
            raise ValueError(f"rref of endpoint '{self._name}' needs "
                             "@endpoint(propagate=fn or 'cached'): fn gives the result shapes "
                             "from fake inputs (the arguments without self)")
        from ._remote import CachedMeta
        from ._remote_exec import META_PREFIX

        key = (mesh._name, self._name)
        cached = mesh._state.cached_meta.get(key)
        if cached is None:
            probe_endpoint = META_PREFIX + self._name
            cached = mesh._state.cached_meta[key] = CachedMeta(
                lambda sink, a, results, pm, stream, loc: sink.call_actor(
                    mesh._name, probe_endpoint, a, results, pm, stream, loc))
        fn = endpoint_function(mesh._class, self._name)
        return call_distributed(
            f"endpoint {mesh._name}.{self._name}", fn, prop, args, kwargs, mesh._proc_mesh,
            lambda sink, a, results, pm, stream, loc: sink.call_actor(
                mesh._name, self._name, a, results, pm, stream, loc),
            skip_self=True, probe=cached.meta)

    def _one(self, handle: Any) -> Future:
        ep = self._name

        def convert(out: Any) -> Any:
            if out[0] == "err":
                _raise_status(out[1], out[2], ep)
            return _unpack_reply(out[1], ep)

        return Future(handle, convert)

    def __repr__(self) -> str:
        return f"<Endpoint {self._mesh._name}.{self._name}>"


_counter_choose = [0]


def actor_pids(mesh: ActorMesh) -> Dict[int, int]:
    """{rank of the view: OS pid of its worker} (tests, diagnostics)."""
    pids = mesh._state.procs.pids()
    return {i: pids[r] for i, r in enumerate(mesh._view.ranks())}


def supervision_events(mesh: ActorMesh) -> List[Tuple[str, int, str]]:
    """Supervision events of the actor procs of this mesh's proc mesh so far:
    [(mesh, rank, reason)]."""
    return mesh._state.procs.events()
