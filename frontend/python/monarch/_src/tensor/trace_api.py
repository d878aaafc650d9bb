"""``monarch.trace(fn, *args)`` and ``monarch.compile(fn)``."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Callable, List, Optional

from ..backend.plan import plan
from ..common.errors import RemoteException, SupervisionError
from ..mesh.view import Dim, MeshView
from .session import Session
from .tracing import Tracer, tracing
from .values import from_tensor_data

_OPT_NAMES = ("monarch-opt", "monarch-opt-static")


def find_monarch_opt() -> Optional[str]:
    """monarch-opt: $MONARCH_OPT, the build trees beside the package (its own
    bin/ or a build/ above it; the self-contained ``monarch-opt-static`` a
    machine without MLIR carries counts too), or PATH."""
    env = os.environ.get("MONARCH_OPT")
    if env:
        return env
    d = os.path.dirname(os.path.abspath(__file__))
    for _ in range(7):
        for name in _OPT_NAMES:
            for build in ("build", "build-compiler", "build-py"):
                p = os.path.join(d, build, "bin", name)
                if os.path.exists(p):
                    return p
            p = os.path.join(d, "bin", name)
            if os.path.exists(p):
                return p
        d = os.path.dirname(d)
    for name in _OPT_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Trace:
    """A captured program."""

    def __init__(self, tracer: Tracer, result: Any = None, name: str = "main"):
        self._tracer = tracer
        self.result = result
        self.name = name

    def to_mlir(self) -> str:
        return self._tracer.to_mlir(self.name)

    def verify(self, *passes: str) -> str:
        """Runs monarch-opt on the IR (plus ``passes``) and returns its output."""
        opt = find_monarch_opt()
        if opt is None:
            raise FileNotFoundError("monarch-opt not found: build the compiler or set MONARCH_OPT")
        with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
            f.write(self.to_mlir())
            path = f.name
        try:
            proc = subprocess.run([opt, path, *passes], capture_output=True, text=True)
        finally:
            os.unlink(path)
        if proc.returncode != 0:
            raise RuntimeError(f"monarch-opt rejected the traced IR:\n{proc.stderr}")
        return proc.stdout

    def to_plan(self) -> bytes:
        """Lowers the IR to a binary plan with monarch-opt --monarch-emit-plan."""
        opt = find_monarch_opt()
        if opt is None:
            raise FileNotFoundError("monarch-opt not found: build the compiler or set MONARCH_OPT")
        d = tempfile.mkdtemp()
        try:
            src = os.path.join(d, "prog.mlir")
            out = os.path.join(d, "prog.plan")
            with open(src, "w") as f:
                f.write(self.to_mlir())
            proc = subprocess.run(
                [opt, src, f"--monarch-emit-plan=output={out} entry={self.name}", "-o",
                 os.devnull],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"monarch-opt could not lower the traced IR:\n{proc.stderr}")
            with open(out, "rb") as f:
                return f.read()
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def run(self, backend: Optional[str] = None, memory_cap: int = 0) -> List[Any]:
        """Lowers the trace to a plan (monarch-opt) and runs it on fresh
        workers: the fetched values, in program order."""
        return run_plan(self.to_plan(), backend=backend, memory_cap=memory_cap)

    def __str__(self) -> str:
        return self.to_mlir()


def trace(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Trace:
    """Runs ``fn`` once, capturing what it does on meshes as monarch dialect IR.

    Meshes created inside ``fn`` start no workers; ``get()`` inside returns a
    placeholder (:class:`monarch._trace_mlir.TracedValue`).
    """
    tracer = Tracer(standalone=True)
    with tracing(tracer):
        result = fn(*args, **kwargs)
    return Trace(tracer, result, name="main")


class Compiled:
    """``monarch.compile(fn)``: call it to run eagerly, or trace it to MLIR."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Trace:
        return trace(self.fn, *args, **kwargs)

    def to_mlir(self, *args: Any, **kwargs: Any) -> str:
        return self.trace(*args, **kwargs).to_mlir()


def compile(fn: Callable[..., Any]) -> Compiled:
    return Compiled(fn)


def run_plan(plan_bytes: bytes, backend: Optional[str] = None, memory_cap: int = 0,
             timeout_ms: int = 60000) -> List[Any]:
    """Runs a whole plan on a fresh mesh of workers; returns what its fetches
    brought back, in program order (a tensor, or the RemoteException of a
    fetch that failed). The same as monarch-run prints."""
    program = plan.Program()
    program.ParseFromString(plan_bytes)
    shape = [(d.name, d.size) for d in program.root]
    session = Session(shape, backend=backend, memory_cap=memory_cap, timeout_ms=timeout_ms,
                      workers=False)
    session.start_backend(program)
    backend_obj = session.backend
    try:
        n_fetch_ranks = 0
        views = {0: session.root_view}
        for m in program.meshes:
            views[m.id] = MeshView(m.offset, [Dim(d.name, d.size, d.stride) for d in m.dims])
        fetch_ids = []
        for inst in program.instructions:
            if inst.WhichOneof("kind") == "fetch":
                fetch_ids.append(inst.id)
                n_fetch_ranks += views[inst.mesh].size()
        batch = plan.InstructionBatch()
        batch.instructions.extend(program.instructions)
        barrier = plan.Instruction(id=max([i.id for i in program.instructions] + [0]) + 1,
                                   mesh=0, stream=0)
        barrier.request_status.SetInParent()
        batch.instructions.append(barrier)
        backend_obj.submit(batch.SerializeToString())
        replies: dict = {}
        statuses = 0
        deadline = time.monotonic() + timeout_ms / 1000.0
        while statuses < session.root_view.size() or len(replies) < len(fetch_ids):
            if time.monotonic() > deadline:
                raise TimeoutError("the plan did not finish in time")
            ev = backend_obj.next_event(200)
            if ev is None:
                continue
            if ev[0] == "proc_failure":
                raise SupervisionError.worker_died(ev[1], ev[2])
            we = plan.WorkerEvent()
            we.ParseFromString(ev[1])
            kind = we.WhichOneof("kind")
            if kind == "status":
                statuses += 1
            elif kind == "fetch":
                r = we.fetch
                if r.WhichOneof("result") == "value":
                    replies[r.instruction] = from_tensor_data(r.value)
                else:
                    e = r.error
                    replies[r.instruction] = RemoteException(e.rank, e.message, e.location,
                                                             e.instruction)
        return [replies[i] for i in fetch_ids]
    finally:
        session.stop()
