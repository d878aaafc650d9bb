"""A root proc mesh's connection to its workers: ids, instructions, futures.

One :class:`Session` per ``spawn_procs``. Eagerly, every captured operation
becomes a plan ``Instruction`` sent to the workers through a backend:
``monarch._C`` (the C++ controller, worker processes) or ``monarch._sim`` (an
in-process simulation of the workers, for machines without the C++ build).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ._errors import RemoteException, SupervisionError
from ._mesh_view import MeshView
from ._plan import plan
from ._values import from_tensor_data

_DEFAULT_TIMEOUT_MS = 60000


def _c_module():
    try:
        from . import _C  # type: ignore[attr-defined]

        return _C
    except ImportError:
        return None


def backend_available(kind: str) -> bool:
    if kind == "sim":
        return True
    return _c_module() is not None


def default_backend_kind() -> str:
    """``$MONARCH_BACKEND``, else ``c``: the in-process simulation runs only
    when asked for, never as a silent stand-in for missing workers."""
    return os.environ.get("MONARCH_BACKEND", "") or "c"


def missing_c_message() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return (
        f"monarch._C (the C++ controller that starts the worker processes) is not built in "
        f"the monarch package at {here}. Build it with `cmake -S . -B build -G Ninja && "
        f"cmake --build build` (docs/building.md; pybind11 and the development headers of the "
        f"Python that imports your torch are needed) and run with PYTHONPATH=build/python; "
        f"or pass backend='sim' (or MONARCH_BACKEND=sim) to spawn_procs for the in-process "
        f"simulation of the workers."
    )


def _worker_path() -> str:
    """$MONARCH_TENSOR_WORKER, else bin/monarch-tensor-worker of the build tree
    the package is staged in (build/python/monarch -> build/bin), else of
    build/ beside the sources (frontend/python/monarch -> build/bin); "" lets
    the controller look for itself."""
    env = os.environ.get("MONARCH_TENSOR_WORKER")
    if env:
        return env
    staged = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    source = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    )
    for base in (staged, os.path.join(source, "build")):
        candidate = os.path.join(base, "bin", "monarch-tensor-worker")
        if os.path.exists(candidate):
            return candidate
    return ""


class Future:
    """The value of one fetch; ``get()`` waits for it."""

    def __init__(self, session: "Session", instruction: int, location: str):
        self._session = session
        self._instruction = instruction
        self._location = location
        self._done = False
        self._value: Any = None
        self._error: Optional[BaseException] = None
        self.source_device = ""

    def _set(self, value: Any = None, error: Optional[BaseException] = None,
             source_device: str = "") -> None:
        self._done = True
        self._value = value
        self._error = error
        #: Where the value lived on the worker ("cpu", "cuda:0"); the value
        #: itself is always on the controller's CPU.
        self.source_device = source_device

    def done(self) -> bool:
        if not self._done:
            self._session.poll(0)
        return self._done

    def get(self, timeout: Optional[float] = None) -> Any:
        self._session.wait_for(self, timeout)
        if self._error is not None:
            raise self._error
        return self._value

    def result(self, timeout: Optional[float] = None) -> Any:
        return self.get(timeout)


class ValueFuture(Future):
    """A future whose value is already known (tracing placeholders)."""

    def __init__(self, value: Any):
        self._done = True
        self._value = value
        self._error = None

    def get(self, timeout: Optional[float] = None) -> Any:
        return self._value

    def done(self) -> bool:
        return True


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
        timeout_ms: int = _DEFAULT_TIMEOUT_MS,
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
        self._futures: Dict[int, Future] = {}
        self._deletes: List[Tuple[int, int, int]] = []
        self._lock = threading.Lock()
        self.failures: List[Any] = []
        self.dead: Optional[SupervisionError] = None
        self.backend_kind = backend or default_backend_kind()
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
        from ._eager import EagerSink

        self.eager = EagerSink(self)
        if workers:
            self._start_backend()

    # -- backend ---------------------------------------------------------------
    def _start_backend_with(self, program: Any) -> None:
        """Starts the workers and declares a whole program's meshes and streams."""
        self._start_backend(program)

    def _start_backend(self, program: Any = None) -> None:
        if self.backend_kind == "c":
            if os.environ.get("MONARCH_WORKER_KIND") == "tensor":
                raise RuntimeError(
                    "an actor on a Python tensor worker cannot start backend 'c' meshes (this "
                    "process holds the worker's copy of the plan schema); use backend='sim'")
            _C = _c_module()
            if _C is None:
                raise ImportError(missing_c_message())
            if self.tensor_worker == "python":
                from ._actor_mesh import _launcher_path

                import importlib.util

                # Only workers import it: it carries its own copy of the plan
                # schema, which must not meet _C's in one process.
                if importlib.util.find_spec("monarch._tensor_worker") is None:
                    raise ImportError("monarch._tensor_worker is not built (Python tensor "
                                      "workers need libtorch_python)")
                worker = _launcher_path("tensor")
            else:
                worker = _worker_path()
            self._backend = _C.Controller(
                [(n, s) for n, s in self.shape],
                memory_cap=self.memory_cap,
                timeout_ms=self.timeout_ms,
                worker_path=worker,
                **(self.hosts or {}),
            )
        elif self.backend_kind == "sim":
            if self.hosts:
                raise ValueError("a mesh across hosts needs the 'c' backend, not 'sim'")
            from ._sim import SimBackend

            self._backend = SimBackend(self.shape, memory_cap=self.memory_cap)
        else:
            raise ValueError(f"unknown MONARCH_BACKEND '{self.backend_kind}' (use 'c' or 'sim')")
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

    def host_workers(self) -> "HostWorkers":
        """How the host agents of this mesh start Python actor workers."""
        if self._backend is None or not self.hosts:
            raise RuntimeError("this mesh does not run on host agents")
        capsule = self._backend.host_mesh_capsule()
        if capsule is None:  # pragma: no cover - hosts always attach one
            raise RuntimeError("the controller holds no host mesh")
        return HostWorkers(capsule, self._host_python, self._host_pythonpath)

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
                self.dead = SupervisionError(-1, str(e))
            raise self.dead from None

    def fetch(self, ref: int, view: MeshView, stream_id: int, location: str) -> Future:
        mid = self.mesh_id(view)
        inst = self.instruction(mid, stream_id, location)
        inst.fetch.ref = ref
        fut = Future(self, inst.id, location)
        self._futures[inst.id] = fut
        self.send(inst)
        return fut

    # -- events ----------------------------------------------------------------
    def _handle(self, event: Any) -> None:
        if event[0] == "proc_failure":
            _, rank, message = event
            self.dead = SupervisionError(rank, message)
            for fut in self._futures.values():
                if not fut._done:
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
                fut._set(value=from_tensor_data(reply.value),
                         source_device=reply.source_device)
            else:
                e = reply.error
                fut._set(
                    error=RemoteException(e.rank, e.message, e.location, e.instruction)
                )
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

    def wait_for(self, fut: Future, timeout: Optional[float]) -> None:
        import time

        limit = self.timeout_ms / 1000.0 if timeout is None else timeout
        deadline = time.monotonic() + limit
        while not fut._done:
            if self.dead is not None:
                fut._set(error=self.dead)
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"no reply from the workers within {limit:.1f}s (fetch issued at "
                    f"{fut._location})"
                )
            self.poll(int(min(left, 1.0) * 1000) + 1)
