"""A root proc mesh's connection to its workers: ids, instructions, futures.

One :class:`Session` per ``spawn_procs``. Eagerly, every captured operation
becomes a plan ``Instruction`` sent to the workers through a backend
(``backend/protocol.py``): ``monarch._C`` (the C++ controller, worker
processes) or the in-process simulation (``sim``, only when asked for).
While tracing, a session without workers only hands out ids.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..backend import workers
from ..backend.plan import plan
from ..common.errors import RemoteException, SupervisionError
from ..common.future import Future, Source
from ..mesh.view import MeshView
from .eager import EagerSink
from .sim import SimBackend
from .values import from_tensor_data

DEFAULT_TIMEOUT_MS = 60000
BACKENDS = ("c", "sim")


def default_backend_kind() -> str:
    """``$MONARCH_BACKEND``, else ``c``: the in-process simulation runs only
    when asked for, never as a silent stand-in for missing workers."""
    return os.environ.get("MONARCH_BACKEND", "") or "c"


def backend_available(kind: str) -> bool:
    return kind == "sim" or workers.available()


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


_HOST_WORKER_KEYS = ("python", "pythonpath")


class HostWorkers(NamedTuple):
    """The agents of a mesh across hosts and the Python they run workers with
    ("": the controller's interpreter path)."""

    capsule: Any
    python: str
    pythonpath: List[str]


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
        self._next_instruction = 1
        self._next_mesh = 1
        self._next_stream = 1
        self._next_borrow = 1
        self._futures: Dict[int, Future[Any]] = {}
        self._deletes: List[Tuple[int, int, int]] = []
        self.failures: List[Any] = []
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
        if workers:
            self.start_backend()

    # -- backend ---------------------------------------------------------------
    def start_backend(self, program: Any = None) -> None:
        """Starts the workers and declares the root (or a whole program's
        meshes and streams)."""
        if self.backend_kind == "c":
            self._backend = workers.start(self.shape, memory_cap=self.memory_cap,
                                          timeout_ms=self.timeout_ms,
                                          tensor_worker=self.tensor_worker, hosts=self.hosts)
        else:
            if self.hosts:
                raise ValueError("a mesh across hosts needs the 'c' backend, not 'sim'")
            self._backend = SimBackend(self.shape, memory_cap=self.memory_cap)
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
    def has_workers(self) -> bool:
        return self._backend is not None

    def stop(self) -> None:
        if self._backend is not None:
            try:
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

    def instruction(self, mesh_id: int, stream_id: int, location: str) -> "plan.Instruction":
        inst = plan.Instruction(
            id=self._next_instruction, mesh=mesh_id, stream=stream_id, location=location
        )
        self._next_instruction += 1
        return inst

    # -- sending ---------------------------------------------------------------
    def queue_delete(self, ref: int, mesh_id: int, stream_id: int) -> None:
        # Called from finalizers: never send from here.
        self._deletes.append((ref, mesh_id, stream_id))

    def _flush_deletes(self) -> List[Any]:
        if not self._deletes:
            return []
        pending, self._deletes = self._deletes, []
        groups: Dict[Tuple[int, int], List[int]] = {}
        for ref, mid, sid in pending:
            groups.setdefault((mid, sid), []).append(ref)
        out = []
        for (mid, sid), refs in groups.items():
            inst = self.instruction(mid, sid, "")
            inst.delete_refs.refs.extend(refs)
            out.append(inst)
        return out

    def send(self, inst: "plan.Instruction") -> None:
        if self._backend is None:
            return
        if self.dead is not None:
            raise self.dead
        batch = plan.InstructionBatch()
        batch.instructions.extend(self._flush_deletes())
        batch.instructions.append(inst)
        try:
            self._backend.submit(batch.SerializeToString())
        except RuntimeError as e:
            # The workers cannot be reached: report the dead worker if the
            # controller has said which one.
            try:
                while self.dead is None and self.poll(0):
                    pass
            except Exception:
                pass
            if self.dead is None:
                self.dead = SupervisionError.worker_died(-1, str(e))
            raise self.dead from None

    def fetch(self, ref: int, view: MeshView, stream_id: int, location: str) -> Future[Any]:
        mid = self.mesh_id(view)
        inst = self.instruction(mid, stream_id, location)
        inst.fetch.ref = ref
        fut: Future[Any] = Future(FetchSource(self, location))
        fut.source_device = ""  # type: ignore[attr-defined]
        self._futures[inst.id] = fut
        self.send(inst)
        return fut

    # -- events ----------------------------------------------------------------
    def _handle(self, event: Any) -> None:
        if event[0] == "proc_failure":
            _, rank, message = event
            self.dead = SupervisionError.worker_died(rank, message)
            for fut in self._futures.values():
                if not fut._complete:
                    fut._set(error=self.dead)
            self._futures.clear()
            return
        ev = plan.WorkerEvent()
        ev.ParseFromString(event[1])
        kind = ev.WhichOneof("kind")
        if kind == "fetch":
            reply = ev.fetch
            fut = self._futures.pop(reply.instruction, None)
            if fut is None:
                return
            if reply.WhichOneof("result") == "value":
                #: Where the value lived on the worker ("cpu", "cuda:0"); the
                #: value itself is always on the controller's CPU.
                fut.source_device = reply.source_device  # type: ignore[attr-defined]
                fut._set(from_tensor_data(reply.value))
            else:
                e = reply.error
                fut._set(error=RemoteException(e.rank, e.message, e.location, e.instruction))
        elif kind == "failure":
            self.failures.append(ev.failure)

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
        while not fut._complete:
            if self.dead is not None:
                fut._set(error=self.dead)
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.poll(int(min(left, 1.0) * 1000) + 1)
