"""``monarch.trace(fn, *args)``: a program captured to MLIR; ``run_plan``."""

from __future__ import annotations

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
from .tracing import Recording, tracing
from .values import from_tensor_data

_OPT_NAMES = ("monarch-opt", "monarch-opt-static")


def compile_timeout_ms() -> int:
    """The bound of one monarch-opt run (monarch.config ``compile_timeout_ms``)."""
    from ..common.config import get_global_config

    value = get_global_config()["compile_timeout_ms"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"MONARCH_COMPILE_TIMEOUT_MS must be a positive number of "
                         f"milliseconds, not {value!r}")
    return value


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


_EMPTY_MODULE = "module {\n  func.func @%s() {\n    return\n  }\n}\n"


class Trace:
    """A captured program: a TracedProgram (``traced``, the bytes monarch-opt
    imports), shown and compiled by monarch-opt."""

    def __init__(self, traced: bytes, result: Any = None, name: str = "main"):
        self.traced = traced
        self.result = result
        self.name = name

    def _opt(self, *args: str, what: str) -> "subprocess.CompletedProcess[str]":
        opt = find_monarch_opt()
        if opt is None:
            raise FileNotFoundError(
                "monarch-opt not found: build the compiler, or copy the self-contained "
                "monarch-opt-static of a machine with the compiler here and set MONARCH_OPT "
                "(docs/building.md)")
        with tempfile.TemporaryDirectory(prefix="monarch-trace-") as d:
            src = os.path.join(d, f"{self.name}.trace")
            with open(src, "wb") as f:
                f.write(self.traced)
            timeout_ms = compile_timeout_ms()
            try:
                proc = subprocess.run([opt, src, *[a.replace("{dir}", d) for a in args]],
                                      capture_output=True, text=True, timeout=timeout_ms / 1000)
            except subprocess.TimeoutExpired as e:
                # subprocess.run has killed it; its partial diagnostics say where it was.
                err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (
                    e.stderr or "")
                raise TimeoutError(
                    f"monarch-opt {what}: no result within {timeout_ms} ms (config "
                    f"compile_timeout_ms, MONARCH_COMPILE_TIMEOUT_MS){': ' + err if err else ''}"
                ) from None
            if proc.returncode != 0:
                raise RuntimeError(f"monarch-opt {what}:\n{proc.stderr}")
            out = os.path.join(d, "prog.plan")
            if os.path.exists(out):
                with open(out, "rb") as f:
                    proc.plan = f.read()  # type: ignore[attr-defined]
            return proc

    def to_mlir(self) -> str:
        """The monarch dialect IR of the program (monarch-opt imports it)."""
        if not self.traced:
            return _EMPTY_MODULE % self.name
        return self._opt("--mlir-print-debuginfo", what="could not import the traced program").stdout

    def verify(self, *passes: str) -> str:
        """Runs monarch-opt on the program (plus ``passes``) and returns its
        output; raises with its diagnostics."""
        if not self.traced:
            return self.to_mlir()
        return self._opt(*passes, what="rejected the traced program").stdout

    def to_plan(self) -> bytes:
        """Lowers the program to a binary plan (monarch-opt --monarch-emit-plan)."""
        if not self.traced:
            raise ValueError("the traced function issued nothing on a mesh")
        proc = self._opt(f"--monarch-emit-plan=output={{dir}}/prog.plan entry={self.name}", "-o",
                         os.devnull, what="could not lower the traced program")
        return proc.plan  # type: ignore[attr-defined]

    def run(self, backend: Optional[str] = None, memory_cap: int = 0) -> List[Any]:
        """Lowers the trace to a plan (monarch-opt) and runs it on fresh
        workers: the fetched values, in program order."""
        return run_plan(self.to_plan(), backend=backend, memory_cap=memory_cap)

    def __str__(self) -> str:
        return self.to_mlir()


def trace(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Trace:
    """Runs ``fn`` once, recording what it does on meshes (docs/python.md
    "Tracing to MLIR").

    Meshes created inside ``fn`` start no workers; ``get()`` inside returns a
    placeholder (:class:`monarch._src.tensor.tracing.TracedValue`).
    """
    if not callable(fn):
        raise TypeError(f"monarch.trace takes a function, got {fn!r}")
    recording = Recording()
    with tracing(recording):
        result = fn(*args, **kwargs)
    return Trace(recording.traced("main"), result, name="main")


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
