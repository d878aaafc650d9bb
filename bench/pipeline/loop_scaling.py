#!/usr/bin/env python3
"""What a traced job costs as a function of its number of steps: the pipeline
job traced step by step (unrolled) and as one ``monarch.range`` loop
(docs/python.md "Loops"), for each step count its trace size, tracing time,
compile time (monarch-opt, the default pipeline) and plan size. Medians of
``--reps`` repetitions in one run; the loop's figures at N steps are reported
as ratios to its figures at the smallest N.

    PYTHONPATH=build/python /usr/bin/python3 bench/pipeline/loop_scaling.py \\
        [--steps 10 100 10000] [--unrolled-max 100] [--reps 5] [--pairs 41] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "pipeline"))

import model  # noqa: E402
import run as job  # noqa: E402


def measure(steps: int, looped: bool, reps: int, opt: str) -> Dict[str, float]:
    cfg = model.Config(steps=steps)
    traced: List[float] = []
    compiled: List[float] = []
    sizes = set()
    trace_bytes = 0
    with tempfile.TemporaryDirectory(prefix="monarch-loop-bench-") as d:
        for _ in range(reps):
            t0 = time.perf_counter()
            tr = job.record_job(cfg, looped)
            t1 = time.perf_counter()
            src, plan = os.path.join(d, "job.trace"), os.path.join(d, "job.plan")
            with open(src, "wb") as f:
                f.write(tr.traced)
            t2 = time.perf_counter()
            job.compile_job(src, plan, opt)
            t3 = time.perf_counter()
            traced.append(t1 - t0)
            compiled.append(t3 - t2)
            sizes.add(os.path.getsize(plan))
            trace_bytes = len(tr.traced)
    assert len(sizes) == 1, sizes  # the same program every repetition
    return {"steps": steps, "looped": looped, "trace_bytes": trace_bytes,
            "trace_s": statistics.median(traced), "compile_s": statistics.median(compiled),
            "plan_bytes": sizes.pop()}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, nargs="+", default=[10, 100, 10000])
    p.add_argument("--unrolled-max", type=int, default=100,
                   help="step counts above this are not traced unrolled (minutes each)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--pairs", type=int, default=41,
                   help="alternate compiles of the smallest and largest loop")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    opt = job.find_tool("monarch-opt", "MONARCH_OPT")
    rows = []
    for looped in (False, True):
        for n in a.steps:
            if not looped and n > a.unrolled_max:
                continue
            rows.append(measure(n, looped, a.reps, opt))
    # The loop's compile time at the largest vs the smallest step count,
    # compiled alternately (pairs see the same load): the median ratio.
    lo, hi = min(a.steps), max(a.steps)
    ratios = []
    with tempfile.TemporaryDirectory(prefix="monarch-loop-bench-") as d:
        srcs = {}
        for n in (lo, hi):
            srcs[n] = os.path.join(d, f"{n}.trace")
            with open(srcs[n], "wb") as f:
                f.write(job.record_job(model.Config(steps=n), True).traced)
        for _ in range(a.pairs):
            t = {}
            for n in (lo, hi):
                t0 = time.perf_counter()
                job.compile_job(srcs[n], os.path.join(d, f"{n}.plan"), opt)
                t[n] = time.perf_counter() - t0
            ratios.append(t[hi] / t[lo])
    base = {r["looped"]: r for r in rows if r["steps"] == min(a.steps)}
    print("| form | steps | trace | traced in | compiled in | plan | plan vs "
          f"{min(a.steps)} steps | compile vs {min(a.steps)} steps |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        b = base[r["looped"]]
        print(f"| {'loop' if r['looped'] else 'unrolled'} | {r['steps']:,} | "
              f"{r['trace_bytes']:,} B | {r['trace_s']:.3f} s | {r['compile_s']:.3f} s | "
              f"{r['plan_bytes']:,} B | {r['plan_bytes'] / b['plan_bytes']:.4f}x | "
              f"{r['compile_s'] / b['compile_s']:.3f}x |")
    print(f"loop: compile time at {hi:,} vs {lo:,} steps, compiled alternately: median ratio "
          f"{statistics.median(ratios):.3f} over {len(ratios)} pairs")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
