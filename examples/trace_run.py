#!/usr/bin/env python3
"""Trace -> compile -> run from Python (docs/python.md, "Tracing to MLIR").

    PYTHONPATH=build/python python3 examples/trace_run.py [--device cpu|cuda]

The program is captured once as monarch dialect IR (no workers start while
tracing), compiled by monarch-opt (the compiler built in this tree, or the
self-contained one a GPU machine carries: $MONARCH_OPT) to a plan, and run on
fresh worker processes; then the same program runs eagerly and the values
are compared.
"""

import argparse
import sys

import torch

import monarch
from monarch.actor import this_host


def step(n: int, device: str):
    mesh = this_host().spawn_procs({"host": 2, "gpu": 2})   # no workers while tracing
    with mesh.activate():
        x = torch.arange(float(n * 4), device=device).reshape(n, 4) / 10
        x = x + mesh.rank(("host", "gpu"))
        r = (x @ x.T).reduce("gpu", "sum")
    return [monarch.fetch_shard(r, host=h, gpu=0) for h in range(2)]


p = argparse.ArgumentParser()
p.add_argument("--device", default="cpu")
a = p.parse_args()

tr = monarch.trace(step, 3, a.device)
tr.verify()
compiled = tr.run()
eager = [f.get() for f in step(3, a.device)]
for c, e in zip(compiled, eager):
    if not torch.allclose(c, e, rtol=1e-4):
        print(f"MISMATCH: compiled {c} vs eager {e}")
        sys.exit(1)
print(f"traced {len(tr.to_mlir().splitlines())} lines of IR; compiled run matches eager on "
      f"{a.device}: {[v[0, 0].item() for v in compiled]}")
