#!/usr/bin/env python3
"""The pipeline job on a machine without the compiler or the Python extension
(the GPU machine): plans are traced and compiled here, run there by monarch-run
alone, and the results analysed here again.

    # here: trace + compile every job, with its single-process reference losses
    PYTHONPATH=build/python /usr/bin/python3 bench/pipeline/job_plans.py prepare bench/pipeline/plans
    # there (scripts/gpu-bench.sh does this): for each job directory J
    monarch-run J/job.plan --trace $OUT/J.trace.json > $OUT/J.stdout
    # here: losses vs reference, step time and bubble from the traces
    PYTHONPATH=build/python /usr/bin/python3 bench/pipeline/job_plans.py report bench/pipeline/plans RESULTS

On CUDA the report uses the trace's device-time events (when each
instruction's work ran on the GPU; its host-side spans are launch times) for
the step time and the bubble; a trace without them (monarch-run built against
a CPU-only torch) gets the step time only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "pipeline"))

import model  # noqa: E402
import run as job  # noqa: E402

# name -> (config, monarch-pipeline-schedule pass or "none"[, default-pipeline
# options]). Every job compiles with the default pipeline, which runs the
# to_mesh transfers on a comm stream (--monarch-assign-streams); the
# "-nostream" jobs keep them on the default stream (assign-to-mesh=false), the
# baseline of that assignment. lr 0.005: at 0.05
# these larger layers train chaotically, and float32 rounding differences
# (another BLAS, the GPU) grow to percent-level loss differences within a few
# steps (float32 vs float64 of the same reference differ by 7% at step 5);
# at 0.005 they stay below 2e-7 over the 20 steps (measured for cuda-pp4-1f1b
# and cpu-widths-even).
NO_STREAM = "assign-to-mesh=false"
JOBS: Dict[str, tuple] = {
    # Each stage its own process, all four on the one GPU: activations move
    # through host copies (no NCCL between processes sharing a device).
    "cuda-pp2dp2-1f1b": (model.Config(pp=2, dp=2, microbatches=8, batch=128, hidden=512,
                                      layers_per_stage=4, steps=20, schedule="1f1b",
                                      device="cuda", lr=0.005), "none"),
    # One stage per GPU where there are two (NCCL between them); on one GPU
    # the two stages share it.
    "cuda-pp2-1f1b": (model.Config(pp=2, dp=1, microbatches=8, batch=128, hidden=512,
                                   layers_per_stage=4, steps=20, schedule="1f1b",
                                   device="cuda", lr=0.005), "none"),
    "cuda-pp4-1f1b": (model.Config(pp=4, dp=1, microbatches=8, batch=128, hidden=512,
                                   layers_per_stage=2, steps=20, schedule="1f1b",
                                   device="cuda", lr=0.005), "none"),
    "cuda-pp2-1f1b-nostream": (model.Config(pp=2, dp=1, microbatches=8, batch=128,
                                            hidden=512, layers_per_stage=4, steps=20,
                                            schedule="1f1b", device="cuda", lr=0.005),
                               "none", NO_STREAM),
    # CPU on 16 idle cores: the measured 1F1B bubble vs (p-1)/(m+p-1).
    "cpu-pp2-1f1b": (model.Config(pp=2, dp=1, microbatches=8, batch=256, hidden=512,
                                  layers_per_stage=2, steps=20, schedule="1f1b", lr=0.005), "1f1b"),
    "cpu-pp4-1f1b": (model.Config(pp=4, dp=1, microbatches=8, batch=256, hidden=512,
                                  layers_per_stage=1, steps=20, schedule="1f1b", lr=0.005), "1f1b"),
    # The same two without the comm stream for transfers (the baseline).
    "cpu-pp2-1f1b-nostream": (model.Config(pp=2, dp=1, microbatches=8, batch=256, hidden=512,
                                           layers_per_stage=2, steps=20, schedule="1f1b",
                                           lr=0.005), "1f1b", NO_STREAM),
    "cpu-pp4-1f1b-nostream": (model.Config(pp=4, dp=1, microbatches=8, batch=256, hidden=512,
                                           layers_per_stage=1, steps=20, schedule="1f1b",
                                           lr=0.005), "1f1b", NO_STREAM),
    # Blocks of different cost: the cost model's partition vs an even one.
    "cpu-widths-auto": (model.Config(pp=2, dp=1, microbatches=8, batch=256, hidden=256,
                                     widths=[64] * 5 + [2048] * 3, steps=20,
                                     schedule="1f1b", lr=0.005), "1f1b"),
    "cpu-widths-even": (model.Config(pp=2, dp=1, microbatches=8, batch=256, hidden=256,
                                     widths=[64] * 5 + [2048] * 3, partition=[4, 4],
                                     steps=20, schedule="1f1b", lr=0.005), "1f1b"),
}
TOLERANCE = {"cpu": 1e-4, "cuda": 1e-3}   # relative, per step (GPU GEMMs sum differently)


def prepare(out: str, names: List[str]) -> None:
    opt = job.find_tool("monarch-opt", "MONARCH_OPT")
    for name, (cfg, sched, *options) in JOBS.items():
        if names and name not in names:
            continue
        cfg = job.partition_job(cfg, opt)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        mlir = os.path.join(d, "job.mlir")
        with open(mlir, "w") as f:
            f.write(job.trace_job(cfg))
        job.compile_job(mlir, os.path.join(d, "job.plan"), opt, sched, *options)
        for f in ("job.mlir", "job.opt.mlir"):   # only the plan travels
            os.remove(os.path.join(d, f))
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump({"config": dataclasses.asdict(cfg), "pass_schedule": sched,
                       "pipeline_options": options[0] if options else "",
                       "reference": model.reference(cfg)}, f)
        print(f"{name}: {d}/job.plan")


def report(plans: str, results: str) -> int:
    rc = 0
    for name in JOBS:
        meta_path = os.path.join(plans, name, "meta.json")
        stdout_path = os.path.join(results, f"{name}.stdout")
        if not (os.path.exists(meta_path) and os.path.exists(stdout_path)):
            print(f"{name}: no result")
            continue
        meta = json.load(open(meta_path))
        cfg = model.Config(**meta["config"])
        losses, ids = job.parse_losses(open(stdout_path).read())
        ref = meta["reference"]
        tol = TOLERANCE["cuda" if cfg.device.startswith("cuda") else "cpu"]
        err = max((abs(x - y) / max(abs(y), 1e-6) for x, y in zip(losses, ref)),
                  default=float("inf"))
        ok = len(losses) == len(ref) and err < tol
        rc |= 0 if ok else 1
        st = job.analyze(os.path.join(results, f"{name}.trace.json"),
                         os.path.join(plans, name, "job.plan"), ids, cfg)
        line = (f"{name}: {len(losses)} steps, losses vs single-process reference: max rel "
                f"diff {err:.1e} ({'OK' if ok else 'MISMATCH'}, tolerance {tol:g}); step "
                f"{st['step_ms']:.2f} ms (median of steps 1..{len(losses) - 1}, "
                f"{job.CLOCK_WORDS[st['clock']]})")
        if not cfg.device.startswith("cuda") or st["clock"] == "gpu":
            line += (f"; bubble {st['bubble']:.3f} measured vs theory {st['bubble_theory']:.3f}"
                     f" (replayed with free transfers {st['bubble_replayed']:.3f})")
        print(line)
    return rc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    prep = sub.add_parser("prepare")
    prep.add_argument("out")
    prep.add_argument("names", nargs="*", help="only these jobs (default: all)")
    r = sub.add_parser("report")
    r.add_argument("plans")
    r.add_argument("results")
    a = p.parse_args()
    if a.cmd == "prepare":
        prepare(a.out, a.names)
        return 0
    return report(a.plans, a.results)


if __name__ == "__main__":
    sys.exit(main())
