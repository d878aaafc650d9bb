#!/usr/bin/env python3
"""The pipeline job's model and data in plain single-process torch, timed per
step: the baseline of the compiled job's step time (docs/benchmarks.md,
"Pipeline job").

    python3 bench/pipeline/single_process.py --device cuda --pp 2 --dp 1 --hidden 512 \\
        --microbatches 8 --batch 64 --steps 20 [--json OUT]

The same stages, initialisation, batches and optimizer as
examples/pipeline/model.py's reference, on one device, the whole batch at
once (no pipeline, no microbatches): what the program is without monarch.
Step time is the median over the steps after two warm-ups, each step
synchronized.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "pipeline"))
import model  # noqa: E402


def step_times(cfg: model.Config) -> list:
    stages = [model.make_stage(cfg, i) for i in range(cfg.pp)]
    params = [p for s in stages for p in s.parameters()]
    opt = model.Optimizer(cfg, params)
    times, losses = [], []
    for step in range(cfg.steps):
        if cfg.device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        xs, ys = zip(*[model.make_batch(cfg, step, float(r)) for r in range(cfg.dp)])
        x, y = torch.cat(xs), torch.cat(ys)
        out = x
        for s in stages:
            out = s(out)
        loss = ((out - y) ** 2).mean()
        grads = torch.autograd.grad(loss, params)
        opt.step(list(grads))
        losses.append(loss.item())  # the loss reaches the host, as the job's fetches
        times.append(time.perf_counter() - t0)
    return times, losses


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--model", default="mlp")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--json", default="")
    a = p.parse_args()
    cfg = model.Config(pp=a.pp, dp=a.dp, microbatches=a.microbatches, batch=a.batch,
                       hidden=a.hidden, layers_per_stage=a.layers, model=a.model,
                       steps=a.steps, device=a.device)
    cfg = dataclasses.replace(cfg, lr=a.lr)
    times, losses = step_times(cfg)
    ms = statistics.median(times[2:]) * 1e3
    print(f"single-process torch on {a.device}: {ms:.3f} ms/step (median of steps 2..{a.steps - 1}); "
          f"losses {losses[0]:.6f} .. {losses[-1]:.6f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"step_ms": ms, "losses": losses}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
