#!/usr/bin/env python3
"""A data-parallel training job as one loop (docs/python.md "Loops").

    PYTHONPATH=build/python python3 examples/ddp_loop.py [--steps 10000] [--device cpu|cuda]

The steps are a ``monarch.range`` loop: the batch and the learning rate are
functions of the step tensor, the gradients are averaged over ``dp``, the
parameters are updated in place on the workers. Traced, the job is one loop
instruction whatever ``--steps`` is; it is compiled by monarch-opt, run on
fresh workers, and its final parameters and last loss are compared with the
same job run eagerly by plain torch in this process.
"""

import argparse
import sys
import time

import torch
import torch.nn as nn

import monarch
from monarch.actor import this_host

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=1000)
p.add_argument("--device", default="cpu")
a = p.parse_args()

HIDDEN, ROWS, DP = 16, 4, 2


def init(model: nn.Module) -> None:
    with torch.no_grad():
        for i, w in enumerate(model.parameters()):
            w.copy_((torch.arange(w.numel(), dtype=w.dtype).reshape(w.shape) - i) / 97)


def job(steps: int, device: str):
    mesh = this_host().spawn_procs({"dp": DP})     # no workers start while tracing
    with mesh.activate():
        r = mesh.rank("dp")
        x0 = torch.sin(torch.arange(float(ROWS * HIDDEN), device=device) + r).reshape(ROWS, HIDDEN)
        y = torch.cos(x0)
        model = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN))
        model.to(device)
        init(model)
        params = list(model.parameters())
        for step in monarch.range(steps):
            x = x0 * (1 + (step % 7) / 10)          # make_batch(step)
            lr = 0.1 / (1 + step / 1000)            # a learning-rate schedule
            loss = ((model(x) - y) ** 2).mean()
            grads = list(monarch.grad_generator(loss, list(reversed(params))))
            for g in grads:
                g.reduce_("dp", "avg")
            with torch.no_grad():
                for w, g in zip(reversed(params), grads):
                    w -= lr * g
        return [monarch.fetch_shard(w, dp=0) for w in params] + [monarch.fetch_shard(loss, dp=0)]


def local(steps: int):
    r = torch.arange(DP, dtype=torch.float32)
    X0 = torch.stack([torch.sin(torch.arange(float(ROWS * HIDDEN)) + k).reshape(ROWS, HIDDEN)
                      for k in r])
    model = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN))
    init(model)
    params = list(model.parameters())
    for k in range(steps):
        x = X0 * (1 + (k % 7) / 10)
        lr = 0.1 / (1 + k / 1000)
        per = [((model(x[d]) - torch.cos(X0[d])) ** 2).mean() for d in range(DP)]
        grads = torch.autograd.grad(sum(per) / DP, params)
        with torch.no_grad():
            for w, g in zip(params, grads):
                w -= lr * g
    return [w.detach() for w in params] + [per[0].detach()]


t0 = time.monotonic()
tr = monarch.trace(job, a.steps, a.device)
t1 = time.monotonic()
plan = tr.to_plan()
t2 = time.monotonic()
got = tr.run()
t3 = time.monotonic()
want = local(a.steps)
bad = [i for i, (g, w) in enumerate(zip(got, want))
       if not torch.allclose(g.cpu(), w, rtol=1e-3, atol=1e-5)]
print(f"{a.steps} steps: traced in {t1 - t0:.2f} s ({len(tr.traced)} bytes), compiled in "
      f"{t2 - t1:.2f} s ({len(plan)} bytes of plan), ran in {t3 - t2:.2f} s on {a.device}; "
      f"last loss {got[-1].item():.6f} (local torch {want[-1].item():.6f})")
if bad:
    print(f"MISMATCH in fetched values {bad}")
    sys.exit(1)
print("final parameters and last loss match local torch")
