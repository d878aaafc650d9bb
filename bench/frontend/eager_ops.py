#!/usr/bin/env python3
"""Per-op cost of the Python frontend against local eager torch (docs/benchmarks.md,
"Python frontend").

    PYTHONPATH=build/python python3 bench/frontend/eager_ops.py [--device cpu|cuda]
        [--ops 2000] [--reps 5] [--compiled] [--mlp] [--json OUT.json]

One chain of 100x100 float ops (x = x + a, x * b, x - a, x / b, repeated), every
figure the median of --reps repetitions, all in one run:

  local     the chain in plain eager torch in this process (synchronized at
            the end on CUDA): the baseline;
  graph     (CUDA) the same chain captured once as a CUDA graph and replayed:
            the launch floor;
  issue     the chain under mesh.activate() on one real worker process: the
            controller's cost per op (the time until every op was issued);
  round     issue + run + fetch of the result (the value round trip);
  trace     monarch.trace of the same program: ops captured per second;
  compiled  (--compiled) monarch-run of the traced program at --ops and 10x
            --ops: per op from the difference of the two wall times, so that
            start-up cancels;
  mlp       (--mlp) forward + backward of a small MLP issued eagerly, per ATen
            op (counted locally with a dispatch mode), against local torch.

Each monarch figure is printed with its ratio to ``local`` of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

import torch


def chain(x: Any, a: Any, b: Any, n: int) -> Any:
    for i in range(n):
        k = i % 4
        if k == 0:
            x = x + a
        elif k == 1:
            x = x * b
        elif k == 2:
            x = x - a
        else:
            x = x / b
    return x


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_time(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_local(device: str, n: int, reps: int) -> float:
    a = torch.rand(100, 100, device=device) + 1
    b = torch.rand(100, 100, device=device) + 1
    x0 = torch.rand(100, 100, device=device)

    def run() -> None:
        chain(x0, a, b, n)
        sync(device)

    return median_time(run, reps) / n


def bench_graph(n: int, reps: int) -> float:
    a = torch.rand(100, 100, device="cuda") + 1
    b = torch.rand(100, 100, device="cuda") + 1
    x0 = torch.rand(100, 100, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        chain(x0, a, b, 8)  # warm the allocator on the capture stream
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        chain(x0, a, b, n)

    def run() -> None:
        g.replay()
        torch.cuda.synchronize()

    return median_time(run, reps) / n


def bench_eager(device: str, n: int, reps: int) -> Dict[str, float]:
    import monarch
    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 1})
    try:
        with mesh.activate():
            a = torch.rand(100, 100, device=device) + 1
            b = torch.rand(100, 100, device=device) + 1
            x0 = torch.rand(100, 100, device=device)
        monarch.inspect(x0.sum())
        issue, rounds = [], []
        for r in range(reps + 1):
            t0 = time.perf_counter()
            with mesh.activate():
                x = chain(x0, a, b, n)
            t1 = time.perf_counter()
            monarch.inspect(x[0, :2])
            t2 = time.perf_counter()
            if r:  # the first is a warm-up
                issue.append((t1 - t0) / n)
                rounds.append((t2 - t0) / n)
        return {"issue": statistics.median(issue), "round": statistics.median(rounds)}
    finally:
        mesh.stop()


def program(n: int, device: str) -> Any:
    import monarch
    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 1})
    with mesh.activate():
        a = torch.rand(100, 100, device=device) + 1
        b = torch.rand(100, 100, device=device) + 1
        x = chain(torch.rand(100, 100, device=device), a, b, n)
    return monarch.fetch_shard(x[0, :2])


def bench_trace(device: str, n: int, reps: int) -> float:
    import monarch

    return median_time(lambda: monarch.trace(program, n, device), reps) / n


def bench_compiled(device: str, n: int, runner: str) -> Dict[str, float]:
    import monarch

    walls = {}
    with tempfile.TemporaryDirectory() as d:
        for count in (n, 10 * n):
            path = os.path.join(d, f"chain{count}.plan")
            with open(path, "wb") as f:
                f.write(monarch.trace(program, count, device).to_plan())
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                subprocess.run([runner, path], check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                runs.append(time.perf_counter() - t0)
            walls[count] = statistics.median(runs)
    return {"per_op": (walls[10 * n] - walls[n]) / (9 * n),
            f"wall_{n}": walls[n], f"wall_{10 * n}": walls[10 * n]}


def mlp_step(model: Any, x: Any) -> Any:
    loss = model(x).square().mean()
    return torch.autograd.grad(loss, list(model.parameters()))


def count_aten_ops(fn: Callable[[], Any]) -> int:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def make_mlp(device: str) -> Any:
    layers: List[Any] = []
    for _ in range(4):
        layers += [torch.nn.Linear(100, 100, device=device), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def bench_mlp(device: str, reps: int) -> Dict[str, float]:
    import monarch
    from monarch.actor import this_host

    torch.manual_seed(0)
    model = make_mlp(device)
    x = torch.rand(32, 100, device=device)
    ops = count_aten_ops(lambda: mlp_step(model, x))
    steps = 20

    def local() -> None:
        for _ in range(steps):
            mlp_step(model, x)
        sync(device)

    t_local = median_time(local, reps) / (steps * ops)
    mesh = this_host().spawn_procs({"gpu": 1})
    try:
        with mesh.activate():
            dmodel = make_mlp(device)
            dx = torch.rand(32, 100, device=device)

        def issue() -> None:
            with mesh.activate():
                for _ in range(steps):
                    g = mlp_step(dmodel, dx)
            monarch.inspect(g[0][0, :2])

        t_eager = median_time(issue, reps) / (steps * ops)
    finally:
        mesh.stop()
    return {"aten_ops_per_step": ops, "local": t_local, "eager": t_eager}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--ops", type=int, default=2000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--compiled", action="store_true")
    p.add_argument("--mlp", action="store_true")
    p.add_argument("--monarch-run", default=os.environ.get("MONARCH_RUN", "build/bin/monarch-run"))
    p.add_argument("--json", default="")
    a = p.parse_args()
    torch.set_num_threads(1)
    n = a.ops
    out: Dict[str, Any] = {"device": a.device, "ops": n, "reps": a.reps,
                           "torch": torch.__version__}
    out["local_us"] = bench_local(a.device, n, a.reps) * 1e6
    if a.device.startswith("cuda"):
        out["graph_us"] = bench_graph(n, a.reps) * 1e6
    eager = bench_eager(a.device, n, a.reps)
    out["issue_us"] = eager["issue"] * 1e6
    out["round_us"] = eager["round"] * 1e6
    out["trace_us"] = bench_trace(a.device, n, max(a.reps // 2, 1)) * 1e6
    if a.compiled:
        c = bench_compiled(a.device, n, a.monarch_run)
        out["compiled_us"] = c["per_op"] * 1e6
        out["compiled_walls_s"] = {k: v for k, v in c.items() if k.startswith("wall")}
    if a.mlp:
        m = bench_mlp(a.device, a.reps)
        out["mlp_aten_ops"] = m["aten_ops_per_step"]
        out["mlp_local_us"] = m["local"] * 1e6
        out["mlp_eager_us"] = m["eager"] * 1e6

    local = out["local_us"]
    print(f"device {a.device}, torch {torch.__version__}, chain of {n} 100x100 ops, "
          f"median of {a.reps}")
    print(f"{'figure':<28}{'us/op':>10}{'x local':>10}")
    rows = [("local eager torch", "local_us"), ("CUDA graph replay", "graph_us"),
            ("monarch eager issue", "issue_us"), ("monarch round trip", "round_us"),
            ("monarch.trace", "trace_us"), ("monarch-run compiled", "compiled_us")]
    for label, key in rows:
        if key in out:
            print(f"{label:<28}{out[key]:>10.2f}{out[key] / local:>10.2f}")
    print(f"tracing: {1e6 / out['trace_us']:.0f} ops/s")
    if "mlp_local_us" in out:
        print(f"MLP fwd+bwd ({out['mlp_aten_ops']} ATen ops/step): local "
              f"{out['mlp_local_us']:.2f} us/op, eager {out['mlp_eager_us']:.2f} us/op "
              f"({out['mlp_eager_us'] / out['mlp_local_us']:.2f}x)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
