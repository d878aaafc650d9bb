#!/usr/bin/env python3
"""The pipeline job with its to_mesh transfers on a comm stream (the default
pipeline's --monarch-assign-streams) vs on the default stream
(assign-to-mesh=false): each plan compiled once, then run alternately, and the
medians of step time and measured bubble over the runs reported, with the
ratio comm/default from the same session.

    PYTHONPATH=build/python /usr/bin/python3 bench/pipeline/comm_stream.py \\
        [--pp 2 --microbatches 8 --batch 256 --hidden 512 --layers 2 --steps 10 --runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "pipeline"))

import model  # noqa: E402
import run as job  # noqa: E402

VARIANTS = {"comm": "", "default": "assign-to-mesh=false"}


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--microbatches", "-m", type=int, default=8)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--runs", type=int, default=5, help="runs of each plan, alternating")
    p.add_argument("--out", default="/tmp/monarch-comm-stream")
    a = p.parse_args(argv)
    cfg = model.Config(pp=a.pp, dp=a.dp, microbatches=a.microbatches, batch=a.batch,
                       hidden=a.hidden, layers_per_stage=a.layers, steps=a.steps,
                       schedule="1f1b", lr=0.005)
    opt = job.find_tool("monarch-opt", "MONARCH_OPT")
    runner = job.find_tool("monarch-run", "MONARCH_RUN")
    os.makedirs(a.out, exist_ok=True)
    mlir = os.path.join(a.out, "job.mlir")
    with open(mlir, "w") as f:
        f.write(job.trace_job(cfg))
    plans = {}
    for name, options in VARIANTS.items():
        plans[name] = os.path.join(a.out, f"{name}.plan")
        job.compile_job(mlir, plans[name], opt, "1f1b", options)

    step: Dict[str, List[float]] = {n: [] for n in VARIANTS}
    bubble: Dict[str, List[float]] = {n: [] for n in VARIANTS}
    losses: Dict[str, List[float]] = {}
    for r in range(a.runs):
        for name in VARIANTS:
            trace = os.path.join(a.out, f"{name}.trace.json")
            got, ids, _, _ = job.run_job(plans[name], trace, runner)
            losses.setdefault(name, got)
            st = job.analyze(trace, plans[name], ids, cfg)
            step[name].append(st["step_ms"])
            bubble[name].append(st["bubble"])
            print(f"run {r} {name:8s} step {st['step_ms']:8.2f} ms  bubble {st['bubble']:.3f}",
                  flush=True)
    same = all(abs(x - y) <= 1e-6 * max(abs(y), 1e-6)
               for x, y in zip(losses["comm"], losses["default"]))
    print(f"pp={cfg.pp} dp={cfg.dp} m={cfg.microbatches} batch={cfg.batch} hidden={cfg.hidden} "
          f"layers/stage={cfg.layers_per_stage}, {cfg.steps} steps, {a.runs} runs each; "
          f"losses {'identical' if same else 'DIFFER'} between the plans; "
          f"theory bubble {(cfg.pp - 1) / (cfg.microbatches + cfg.pp - 1):.3f}")
    for name in VARIANTS:
        print(f"  transfers on {name:8s} stream: step {statistics.median(step[name]):8.2f} ms "
              f"(runs {', '.join(f'{x:.0f}' for x in step[name])}), bubble "
              f"{statistics.median(bubble[name]):.3f}")
    print(f"  comm/default step-time ratio {statistics.median(step['comm']) / statistics.median(step['default']):.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
