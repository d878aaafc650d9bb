"""A root proc mesh's connection to its workers: ids, instructions, futures.

One :class:`Session` per ``spawn_procs``. Eagerly, every captured operation
becomes a plan ``Instruction`` on the session's instruction stream
(``monarch._C.InstructionStream``: ops from cached templates, batching,
deletes; frontend/csrc/InstructionStream.h), which sends batches to a
backend (``backend/protocol.py``): the C++ controller and its worker
processes, or the in-process simulation (``sim``, only when asked for).
While tracing, a session without workers only hands out ids.
"""

from __future__ import annotations

import collections
import os
import time
import weakref
from typing import Any, Deque, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..backend import workers as c_backend
from ..backend.plan import plan
from ..common.errors import RemoteException, SupervisionError
from ..common.future import Future, Source
from ..mesh.view import MeshView
from . import devices
from .eager import EagerSink
from .modes import local
from .sim import SimBackend
from .tracing import TracedValue
from .values import from_tensor_data, to_value

DEFAULT_TIMEOUT_MS = 60000
BACKENDS = ("c", "sim")


def default_backend_kind() -> str:
    """``$MONARCH_BACKEND``, else ``c``: the in-process simulation runs only
    when asked for, never as a silent stand-in for missing workers."""
    return os.environ.get("MONARCH_BACKEND", "") or "c"


def backend_available(kind: str) -> bool:
    return kind == "sim" or c_backend.available()


def _no_refs(t: Any) -> int:
    raise TypeError("an op schema's default names a tensor")


class FetchSource(Source):
    """A fetched shard: completed by the session's event loop."""

    def __init__(self, session: "Session", location: str):
        self._session = session
        self._location = location
        self.default_timeout = session.timeout_ms / 1000.0

    def wait(self, future: Future[Any], timeout: Optional[float]) -> None:
        self._session.wait_for(future, timeout)

    def ready(self, future: Future[Any]) -> bool:
        self._session.poll(0)
        return future._complete

    def timeout_error(self, timeout: Optional[float]) -> BaseException:
        return TimeoutError(f"no reply from the workers within {timeout:.1f}s (fetch issued "
                            f"at {self._location})")


class BodyFetchSource(Source):
    """A fetch issued while a compiled step is traced: its value exists only
    once a call of the step has run (compiled.py hands each call a future)."""

    def __init__(self, location: str):
        self._location = location
        self.default_timeout = None

    def wait(self, future: Future[Any], timeout: Optional[float]) -> None:
        raise self.error()

    def ready(self, future: Future[Any]) -> bool:
        return False

    def timeout_error(self, timeout: Optional[float]) -> BaseException:
        return self.error()

    def error(self) -> BaseException:
        from ..common.errors import usage
        return usage(
            "GET_IN_COMPILED_STEP",
            f"get() of a value fetched inside a compiled step (fetched at {self._location}): "
            "the step is traced once and replayed, so Python cannot branch on its values; "
            "return the future from the step and get() it after the call")


_HOST_WORKER_KEYS = ("python", "pythonpath")


class HostWorkers(NamedTuple):
    """The agents of a mesh across hosts and the Python they run workers with
    ("": the controller's interpreter path)."""

    capsule: Any
    python: str
    pythonpath: List[str]


#: The sessions with workers now (compiled steps find theirs here).
live_sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()


#: Root failures a session keeps to name them in dependent errors.
FAILURES_KEPT = 4096


class Session:
    """Ids and the instruction stream of one root mesh."""

    def __init__(
        self,
        shape: Sequence[Tuple[str, int]],
        backend: Optional[str] = None,
        memory_cap: int = 0,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        workers: bool = True,
        tensor_worker: str = "",
        hosts: Optional[Dict[str, Any]] = None,
        recording: Any = None,
    ):
        self.tensor_worker = tensor_worker or os.environ.get("MONARCH_TENSOR_WORKER_KIND",
                                                             "native")
        if self.tensor_worker not in ("native", "python"):
            raise ValueError(f"tensor_worker must be 'native' or 'python', not "
                             f"{self.tensor_worker!r}")
        self.root_view = MeshView.root(shape)
        self.shape = list(shape)
        self.mesh_ids: Dict[MeshView, int] = {self.root_view: 0}
        self.stream_ids: Dict[str, int] = {"": 0}
        self._next_ref = 1
        self._next_mesh = 1
        self._next_stream = 1
        self._next_borrow = 1
        self._futures: Dict[int, Future[Any]] = {}
        #: Fetches inside compiled steps: per body fetch id, the futures of
        #: the calls issued so far (each call's reply comes in call order).
        self._body_futures: Dict[int, Deque[Future[Any]]] = {}
        #: The compiled step being traced (compiled.BodyTrace), if any.
        self.body: Any = None
        self._next_recording = 1
        #: The instruction stream (None: no workers, nothing is sent).
        self.stream: Any = None
        #: Per stream: {(code object, line): location id}.
        self.locations: Dict[Any, int] = {}
        #: Per stream: {dispatch.Entry: template id}.
        self.templates: Dict[Any, int] = {}
        #: Root failures the workers reported, by (instruction, rank), the
        #: newest FAILURES_KEPT: what a dependent error from another rank
        #: names (see _remote_error).
        self.failures: "collections.OrderedDict[Tuple[int, int], Any]" = \
            collections.OrderedDict()
        self.dead: Optional[SupervisionError] = None
        self.backend_kind = backend or default_backend_kind()
        if self.backend_kind not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend_kind!r} (use 'c' or 'sim')")
        self.memory_cap = memory_cap
        self.timeout_ms = timeout_ms
        # Multi-host (docs/multi-host.md): where the host agents are; the
        # shape's first dim is the hosts. "python"/"pythonpath" say how the
        # agents start Python actor workers (host_workers).
        self.hosts = {k: v for k, v in hosts.items() if k not in _HOST_WORKER_KEYS} \
            if hosts else None
        self._host_python = (hosts or {}).get("python") or os.environ.get(
            "MONARCH_HOST_PYTHON", "")
        self._host_pythonpath = list((hosts or {}).get("pythonpath") or ())
        self._backend: Any = None
        self.eager = EagerSink(self)
        #: While tracing (tracing.Recording): the stream records, nothing runs.
        self.recording = recording
        self._origins: set = set()
        self._schemas: set = set()
        if recording is not None:
            _C = c_backend.c_module()
            if _C is None:
                raise ImportError(c_backend.missing_message())
            self.stream = _C.InstructionStream(None)
            program = plan.Program(magic=0x4D4F4E50, version=1)
            for name, size in self.shape:
                program.root.add(name=name, size=size)
            self.stream.declare(program.SerializeToString())
            recording.add(self)
        elif workers:
            self.start_backend()
            live_sessions.add(self)

    # -- backend ---------------------------------------------------------------
    def start_backend(self, program: Any = None) -> None:
        """Starts the workers and declares the root (or a whole program's
        meshes and streams)."""
        if self.backend_kind == "c":
            self._backend = c_backend.start(self.shape, memory_cap=self.memory_cap,
                                          timeout_ms=self.timeout_ms,
                                          tensor_worker=self.tensor_worker, hosts=self.hosts)
            self.stream = c_backend.c_module().InstructionStream(self._backend)
            if not self.hosts:
                devices.warn_shared_gpus(self.root_view.size())
        else:
            if self.hosts:
                raise ValueError("a mesh across hosts needs the 'c' backend, not 'sim'")
            _C = c_backend.c_module()
            if _C is None:  # the instruction stream is C++ for every backend
                raise ImportError(c_backend.missing_message())
            self._backend = SimBackend(self.shape, memory_cap=self.memory_cap)
            # One instruction a batch: the simulation runs each at once.
            self.stream = _C.InstructionStream(self._backend, max_batch=1, max_delay_us=0)
        if program is None:
            program = plan.Program(magic=0x4D4F4E50, version=1)
            for name, size in self.shape:
                program.root.add(name=name, size=size)
        else:
            decl = plan.Program()
            decl.CopyFrom(program)
            del decl.instructions[:]
            program = decl
        self._backend.declare(program.SerializeToString())

    @property
    def backend(self) -> Any:
        return self._backend

    @property
    def issued(self) -> int:
        """Instructions issued so far (tests check that misuse sends none)."""
        return self.stream.issued if self.stream is not None else 0

    @property
    def has_workers(self) -> bool:
        return self._backend is not None

    def stop(self) -> None:
        live_sessions.discard(self)
        if self._backend is not None:
            # What is issued afterwards fails at once, never waits for
            # workers that are gone.
            if self.dead is None:
                self.dead = SupervisionError(
                    "the mesh is stopped (ProcMesh.stop()): nothing can run on it")
            try:
                if self.stream is not None:
                    stream, self.stream = self.stream, None
                    try:
                        stream.close()  # what is pending still goes out
                    except RuntimeError:
                        pass  # the workers are gone: nothing to deliver to
                self._backend.stop()
            finally:
                self._backend = None

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:
            pass

    # -- what the actor layer asks (backend/protocol.CapsuleSource) --------------
    def actor_procs_capsule(self) -> Any:
        """The workers' proc mesh when actors live beside the executors (Python
        tensor workers: rref), else None."""
        if self.backend_kind == "c" and self.tensor_worker == "python" and self.has_workers:
            return self._backend.procs_capsule()
        return None

    def host_workers(self) -> Optional[HostWorkers]:
        """How the host agents of this mesh start Python actor workers (None
        on one host)."""
        if self._backend is None or not self.hosts:
            return None
        capsule = self._backend.host_mesh_capsule()
        if capsule is None:  # pragma: no cover - hosts always attach one
            raise RuntimeError("the controller holds no host mesh")
        return HostWorkers(capsule, self._host_python, self._host_pythonpath)

    # -- ids -------------------------------------------------------------------
    def new_ref(self) -> int:
        r = self._next_ref
        self._next_ref += 1
        return r

    def location_id(self, code: Any, line: int) -> int:
        """The stream's id of a source location (interned once per line)."""
        key = (code, line)
        lid = self.locations.get(key)
        if lid is None:
            text = f"{code.co_filename}:{line}" if code is not None else ""
            lid = self.locations[key] = self.stream.location(text)
        return lid

    def new_borrow(self) -> int:
        b = self._next_borrow
        self._next_borrow += 1
        return b

    def mesh_id(self, view: MeshView) -> int:
        mid = self.mesh_ids.get(view)
        if mid is None:
            mid = self._next_mesh
            self._next_mesh += 1
            self.mesh_ids[view] = mid
            inst = self.instruction(0, 0, "")
            m = inst.create_mesh.mesh
            m.id = mid
            m.offset = view.offset
            for d in view.dims:
                m.dims.add(name=d.name, size=d.size, stride=d.stride)
            self.send(inst)
        return mid

    def mesh_id_of(self, mesh: Any) -> int:
        """``mesh_id`` of a ProcMesh view, remembered on the view."""
        mid = mesh.__dict__.get("_tensor_mesh_id")
        if mid is None:
            mid = mesh.__dict__["_tensor_mesh_id"] = self.mesh_id(mesh._view)
            if self.recording is not None and mesh._parent is not None:
                self._record_origin(mesh, mid)
        return mid

    def _record_origin(self, mesh: Any, mid: int) -> None:
        """How a traced program made the view ``mid`` (trace.proto MeshOrigin)."""
        if mid in self._origins or mid == 0:
            return
        self._origins.add(mid)
        parent = self.mesh_id_of(mesh._parent)
        kind, args = mesh._derivation
        if kind == "rename":
            spec: Any = list(args.items())
        elif kind == "split":
            dims, sizes = args
            spec = ([(d, list(names)) for d, names in dims.items()], list(sizes.items()))
        elif kind == "slice":
            spec = []
            for d, v in args.items():
                if isinstance(v, (slice, range)):
                    spec.append((d, (v.start, v.stop, v.step)))
                else:
                    spec.append((d, int(v)))
        else:
            spec = args
        self.stream.mesh_origin(mid, parent, kind, spec)

    def note_schema(self, func: Any) -> None:
        """While tracing: the argument list of an ATen op the program calls."""
        if self.recording is None or func in self._schemas:
            return
        self._schemas.add(func)
        schema = func._schema
        arguments = []
        for a in schema.arguments:
            default = None
            if a.has_default_value():
                default = to_value(a.default_value, str(a.type), _no_refs).SerializeToString()
            arguments.append((a.name, default))
        self.stream.op_schema(schema.name, schema.overload_name, arguments)

    def stream_id(self, name: str) -> int:
        sid = self.stream_ids.get(name)
        if sid is None:
            sid = self._next_stream
            self._next_stream += 1
            self.stream_ids[name] = sid
            inst = self.instruction(0, 0, "")
            inst.create_stream.stream.id = sid
            inst.create_stream.stream.name = name
            self.send(inst)
        return sid

    @staticmethod
    def instruction(mesh_id: int, stream_id: int, location: str) -> "plan.Instruction":
        """An instruction to fill in and ``send``; the stream assigns its id."""
        return plan.Instruction(mesh=mesh_id, stream=stream_id, location=location)

    # -- sending ---------------------------------------------------------------
    def queue_delete(self, ref: int, mesh_id: int, stream_id: int) -> None:
        """The ref's last handle went away (a finalizer): the stream sends a
        DeleteRefs after the instructions already issued."""
        stream = self.stream
        if stream is not None:
            stream.delete_ref(ref, mesh_id, stream_id)

    def unreachable(self, error: RuntimeError) -> SupervisionError:
        """The stream could not send: the dead worker if the controller has
        said which one, else that the workers cannot be reached."""
        try:
            while self.dead is None and self.poll(0):
                pass
        except Exception:
            pass
        if self.dead is None:
            self.dead = SupervisionError.worker_died(-1, str(error))
        return self.dead

    def send(self, inst: "plan.Instruction",
             types: Sequence[Tuple[int, int, List[int]]] = ()) -> int:
        """Issues one instruction (any kind); returns its id (0 when nothing
        runs: a session without workers). ``types``: (ref, dtype code, shape)
        of the refs it defines, recorded while tracing."""
        if self.dead is not None:
            raise self.dead
        if self.stream is None:
            return 0
        try:
            return self.stream.raw(inst.SerializeToString(),
                                   list(types) if self.recording is not None else [])
        except RuntimeError as e:
            raise self.unreachable(e) from None

    def op(self, template: int, mesh_id: int, stream_id: int, location: int,
           inputs: Tuple[int, ...], results: Tuple[int, ...]) -> int:
        """Issues an op from a template of this session's stream."""
        if self.dead is not None:
            raise self.dead
        try:
            return self.stream.op(template, mesh_id, stream_id, location, inputs, results)
        except RuntimeError as e:
            raise self.unreachable(e) from None

    def flush(self) -> None:
        if self.stream is not None and self.dead is None:
            try:
                self.stream.flush()
            except RuntimeError as e:
                raise self.unreachable(e) from None

    def fetch(self, ref: int, view: MeshView, stream_id: int, location: str,
              meta: Optional[Tuple[Tuple[int, ...], Any]] = None) -> Future[Any]:
        """A future of one rank's value (``view`` is that rank's 0-d view);
        while tracing a placeholder of ``meta`` (shape, dtype)."""
        mid = self.mesh_id(view)
        inst = self.instruction(mid, stream_id, location)
        inst.fetch.ref = ref
        if self.recording is not None:
            shape, dtype = meta if meta is not None else ((), None)
            return Future.ready(TracedValue(self.send(inst), tuple(shape), dtype))
        if self.body is not None:  # a compiled step: each call gets a future
            placeholder: Future[Any] = Future(BodyFetchSource(location))
            self.body.fetched.append(placeholder)
            self.send(inst)
            return placeholder
        fut: Future[Any] = Future(FetchSource(self, location))
        fut.source_device = ""  # type: ignore[attr-defined]
        iid = self.send(inst)
        self._futures[iid] = fut
        self.flush()  # a fetch goes out now: someone waits for it
        return fut

    def new_recording(self) -> int:
        r = self._next_recording
        self._next_recording += 1
        return r

    def expect_body_fetch(self, fetch_id: int, location: str) -> Future[Any]:
        """The future of the next reply to the body fetch ``fetch_id``."""
        fut: Future[Any] = Future(FetchSource(self, location))
        fut.source_device = ""  # type: ignore[attr-defined]
        q = self._body_futures.get(fetch_id)
        if q is None:
            q = self._body_futures[fetch_id] = collections.deque()
        q.append(fut)
        return fut

    # -- events ----------------------------------------------------------------
    def _handle(self, event: Any) -> None:
        if event[0] == "proc_failure":
            _, rank, message = event
            self.dead = SupervisionError.worker_died(rank, message)
            pending = list(self._futures.values())
            for q in self._body_futures.values():
                pending.extend(q)
            for fut in pending:
                if not fut._complete:
                    fut._set(error=self.dead)
            self._futures.clear()
            self._body_futures.clear()
            return
        ev = plan.WorkerEvent()
        ev.ParseFromString(event[1])
        kind = ev.WhichOneof("kind")
        if kind == "fetch":
            reply = ev.fetch
            fut = self._futures.pop(reply.instruction, None)
            if fut is None:
                q = self._body_futures.get(reply.instruction)
                if not q:
                    return
                fut = q.popleft()
            if reply.WhichOneof("result") == "value":
                #: Where the value lived on the worker ("cpu", "cuda:0"); the
                #: value itself is always on the controller's CPU.
                fut.source_device = reply.source_device  # type: ignore[attr-defined]
                with local():  # a get() inside mesh.activate() decodes locally
                    value = from_tensor_data(reply.value)
                fut._set(value)
            else:
                fut._set(error=self._remote_error(reply.error))
        elif kind == "failure":
            f = ev.failure
            self.failures[(f.instruction, f.rank)] = f
            while len(self.failures) > FAILURES_KEPT:
                self.failures.popitem(last=False)

    def _remote_error(self, e: Any) -> RemoteException:
        """A fetch's error. It names its root failure (instruction, rank);
        where its message is not the root's own -- a value that was an error
        on the rank it came from (``to_mesh``), which only that rank and the
        root's id cross processes for -- the root's message is added when that
        rank has reported it."""
        message = e.message
        root = self.failures.get((e.instruction, e.rank))
        if root is not None and root.message != message:
            where = f" (issued at {root.location})" if root.location else ""
            message += f": {root.message}{where}"
        return RemoteException(e.rank, message, e.location, e.instruction)

    def poll(self, timeout_ms: int) -> bool:
        if self._backend is None:
            return False
        event = self._backend.next_event(timeout_ms)
        if event is None:
            return False
        self._handle(event)
        return True

    def wait_for(self, fut: Future[Any], timeout: Optional[float]) -> None:
        """Handles events until ``fut`` is complete or ``timeout`` seconds
        (None: the session's timeout) passed."""
        limit = self.timeout_ms / 1000.0 if timeout is None else timeout
        deadline = time.monotonic() + limit
        try:
            self.flush()
        except SupervisionError:
            pass  # reported below through self.dead
        while not fut._complete:
            if self.dead is not None:
                fut._set(error=self.dead)
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.poll(int(min(left, 1.0) * 1000) + 1)
