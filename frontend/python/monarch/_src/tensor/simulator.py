"""``monarch.Simulator``: a mesh whose program is simulated rather than run
(Monarch's ``monarch.Simulator``; docs/python.md "Simulator").

    simulator = monarch.Simulator(hosts=1, gpus=4)
    with simulator.mesh.rename(gpu="dp").activate():
        train(model, batch)               # recorded: no worker runs it
    simulator.display()                   # the simulated timeline

The mesh starts no workers. What a program issues on it is recorded exactly
as ``monarch.trace`` records it (``tracing.Recording``; a fetched value is a
placeholder), and ``display()`` replays the recording with the compiler's
cost model (``monarch-opt --monarch-simulate``, docs/passes.md "Simulator"):
one in-order queue per stream, borrows and collectives as the dependencies
between them, the program as written (no optimization pass runs first). It
prints the simulated step time, each stream's busy time and how much of the
communication overlaps compute, and writes the timeline as Chrome trace JSON.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any, List, Optional

from .trace_api import Trace
from .tracing import Recording, tracing

#: Monarch's trace modes (``SimulatorTraceMode``), by name. The cost model
#: simulates the workers' streams; the controller's own timeline is not.
_TRACE_MODES = ("stream_only", "everything", "controller_trace_only")


def _mode_name(mode: Any) -> str:
    name = getattr(mode, "name", mode)  # Monarch's enum, or its name
    if not isinstance(name, str) or name.lower() not in _TRACE_MODES:
        raise ValueError(f"trace_mode must be one of {', '.join(_TRACE_MODES)}, not {mode!r}")
    name = name.lower()
    if name == "controller_trace_only":
        raise NotImplementedError(
            "monarch.Simulator(trace_mode='controller_trace_only'): the simulation is of the "
            "workers' streams; the controller's timeline is not simulated")
    return name


class Simulator:
    """A simulated mesh of ``hosts`` x ``gpus`` ranks (dims ``host``, ``gpu``).
    ``trace_path``: where ``display()`` writes the timeline (default: a new
    file in the temporary directory, kept for the user to open)."""

    def __init__(self, hosts: int = 1, gpus: int = 1, *, trace_mode: Any = "stream_only",
                 trace_path: Optional[str] = None):
        for name, value in (("hosts", hosts), ("gpus", gpus)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"monarch.Simulator: {name} must be a positive int, "
                                 f"not {value!r}")
        self.trace_mode = _mode_name(trace_mode)
        self.trace_path = trace_path
        self._recording = Recording()
        from ..actor.host_mesh import this_host  # tensor may import actor

        with tracing(self._recording):
            self.mesh = this_host().spawn_procs({"host": hosts, "gpu": gpus})

    def display(self) -> List[str]:
        """Simulates what was issued so far and prints the result: the
        compiler's report lines (also returned) and where the timeline is."""
        traced = self._recording.traced("main")
        path = self.trace_path
        if path is None:
            fd, path = tempfile.mkstemp(prefix="monarch-simulation-", suffix=".json")
            os.close(fd)
        proc = Trace(traced, name="main")._opt(
            f"--monarch-simulate=trace-file={path}", "-o", os.devnull,
            what="could not simulate the program")
        lines = [ln.split("remark:", 1)[1].strip() for ln in proc.stderr.splitlines()
                 if "remark:" in ln]
        for ln in lines:
            print(f"monarch.Simulator: {ln}")
        print(f"monarch.Simulator: timeline of {self.mesh._describe()} in {path} "
              "(chrome://tracing or ui.perfetto.dev)")
        sys.stdout.flush()
        return lines
