#!/usr/bin/env python3
"""A compiled step called from eager Python (docs/benchmarks.md, "Compiled
steps"): what one call of ``monarch.compile(step)`` costs the controller.

    PYTHONPATH=build/python python3 bench/frontend/compiled_step.py [--device cpu|cuda]
        [--ops 1500] [--calls 2000] [--reps 5] [--graphs on|off|both] [--json OUT.json]

The step is one chain of --ops 100x100 float ops (eager_ops.py's chain) whose
result is copied into a tensor kept across calls. Every figure is the median
of --reps repetitions, all in one run:

  local      the step in plain eager torch in this process: the baseline;
  eager      the step under mesh.activate() on one worker, issued op by op
             (the time until every op was issued);
  compile    the first calls of the compiled step (two traces, then stable);
  issue      --calls calls of the stable compiled step: the controller's time
             per call until all were issued (the workers run behind it);
  run        the same calls until the last one's value came back: what the
             worker's execution costs per step, against local;
  messages   instructions the controller sends per call.

On CUDA the worker replays the step as a captured CUDA graph (docs/plan.md,
"CUDA graphs"; MONARCH_CUDA_GRAPHS=on, the default); --graphs both (the default there) also
measures a second mesh whose workers run it op by op (MONARCH_CUDA_GRAPHS=off), and the floor: the
same chain captured with torch.cuda.CUDAGraph in this process and replayed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Dict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eager_ops import bench_graph, chain, median_time, sync  # noqa: E402


def bench_local(device: str, n: int, reps: int) -> float:
    a = torch.rand(100, 100, device=device) + 1
    b = torch.rand(100, 100, device=device) + 1
    x = torch.rand(100, 100, device=device)

    def step() -> None:
        x.copy_(chain(x, a, b, n))

    def run() -> None:
        for _ in range(10):
            step()
        sync(device)

    return median_time(run, reps) / 10


def bench_monarch(device: str, n: int, calls: int, reps: int,
                  graphs: str = "on") -> Dict[str, Any]:
    import monarch
    from monarch.actor import this_host

    # The workers read it when they start (docs/plan.md, "CUDA graphs").
    os.environ["MONARCH_CUDA_GRAPHS"] = graphs
    mesh = this_host().spawn_procs({"gpu": 1})
    session = mesh._session
    try:
        with mesh.activate():
            a = torch.rand(100, 100, device=device) + 1
            b = torch.rand(100, 100, device=device) + 1
            x = torch.rand(100, 100, device=device)

        def step() -> None:
            x.copy_(chain(x, a, b, n))

        eager = []
        for r in range(reps + 1):
            with mesh.activate():
                t0 = time.perf_counter()
                step()
                t1 = time.perf_counter()
            monarch.inspect(x[0, :2])
            if r:
                eager.append(t1 - t0)

        compiled = monarch.compile(step)
        t0 = time.perf_counter()
        with mesh.activate():
            for _ in range(3):  # trace, trace and compare, replay
                compiled()
        monarch.inspect(x[0, :2])
        compile_s = time.perf_counter() - t0

        issue, run, per_call = [], [], []
        for _ in range(reps):
            before = session.issued
            with mesh.activate():
                t0 = time.perf_counter()
                for _ in range(calls):
                    compiled()
                t1 = time.perf_counter()
            per_call.append((session.issued - before) / calls)
            monarch.inspect(x[0, :2])
            t2 = time.perf_counter()
            issue.append((t1 - t0) / calls)
            run.append((t2 - t0) / calls)
        sig = next(iter(compiled._signatures.values()))
        return {"eager_s": statistics.median(eager), "compile_s": compile_s,
                "issue_s": statistics.median(issue), "run_s": statistics.median(run),
                "instructions_per_call": statistics.median(per_call),
                "traces": sig.traces, "stable": sig.stable}
    finally:
        mesh.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--ops", type=int, default=1500)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--graphs", choices=["on", "off", "both"], default="")
    p.add_argument("--json", default="")
    a = p.parse_args()
    graphs = a.graphs or ("both" if a.device == "cuda" else "off")
    torch.set_num_threads(1)
    out: Dict[str, Any] = {"device": a.device, "ops": a.ops, "calls": a.calls,
                           "reps": a.reps, "torch": torch.__version__}
    out["local_s"] = bench_local(a.device, a.ops, a.reps)
    if a.device == "cuda":
        out["graph_s"] = bench_graph(a.ops, a.reps) * a.ops  # per step
    out.update(bench_monarch(a.device, a.ops, a.calls, a.reps,
                             "off" if graphs == "off" else "on"))
    if graphs == "both":
        off = bench_monarch(a.device, a.ops, a.calls, a.reps, "off")
        out["run_off_s"] = off["run_s"]
        out["issue_off_s"] = off["issue_s"]
    local = out["local_s"]
    print(f"device {a.device}, torch {torch.__version__}, a step of {a.ops} 100x100 ops, "
          f"{a.calls} calls, median of {a.reps}")
    print(f"{'figure':<38}{'us/step':>12}{'us/op':>9}{'x local':>9}{'x graph':>9}")
    rows = [("local eager torch", "local_s"), ("CUDA graph replay (the floor)", "graph_s"),
            ("monarch eager, issued", "eager_s"),
            ("compiled, issued per call", "issue_s"),
            ("compiled, run per call" + (", graphs" if graphs != "off" and
                                         a.device == "cuda" else ""), "run_s"),
            ("compiled, run per call, op by op", "run_off_s")]
    for label, key in rows:
        if key not in out:
            continue
        floor = f"{out[key] / out['graph_s']:>9.2f}" if "graph_s" in out else ""
        print(f"{label:<38}{out[key] * 1e6:>12.1f}{out[key] * 1e6 / a.ops:>9.3f}"
              f"{out[key] / local:>9.3f}{floor}")
    print(f"compiled: {1 / out['issue_s']:.0f} calls/s issued; "
          f"{out['instructions_per_call']:.2f} instructions per call for {a.ops} ops "
          f"({100 * out['instructions_per_call'] / a.ops:.3f}%); first 3 calls "
          f"{out['compile_s'] * 1e3:.0f} ms ({out['traces']} traces, stable {out['stable']})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
