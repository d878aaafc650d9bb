#!/usr/bin/env python3
"""Measures a cost-model profile (docs/passes.md "Cost model") on this machine.

Runs one probe program with monarch-run --trace on `--ranks` CPU workers
(or, with --plan, a plan compiled elsewhere by --write-plan) and fits:
  flops_per_s  from aten::mm of n x n matrices (2 n^3 flops each),
  bytes_per_s  from aten::add of large tensors (3 x 4 bytes per element),
  launch_s     from aten::add of 1-element tensors,
  all_reduce   alpha_s and bytes_per_s by least squares over message sizes,
               in the cost model's ring form:
               t = 2 (n-1) alpha + 2 (n-1)/n * bytes / bytes_per_s.
Writes the JSON profile that --monarch-schedule-overlap / --monarch-simulate /
the default pipeline read with `profile=FILE`.

    /usr/bin/python3 bench/passes/calibrate.py --monarch-run build/bin/monarch-run \\
        --ranks 2 -o cpu-profile.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "monarch-run"))
import trace_events  # noqa: E402

MM_SIZES = [128, 256, 512, 1024]
ADD_ELEMENTS = 1 << 22
REDUCE_ELEMENTS = [1 << 10, 1 << 14, 1 << 18, 1 << 21, 1 << 22]
REPS = 5
TINY = 20


def program(ranks: int) -> str:
    T = lambda shape: f"!monarch.tensor<{shape}xf32, <dp = {ranks}>>"
    lines = ["func.func @main() {", f"  %m = monarch.spawn_procs : !monarch.mesh<dp = {ranks}>"]
    n = 0

    def op(schema, args, types, result, consts=""):
        nonlocal n
        n += 1
        operands = ", ".join(args + ([consts] if consts else []))
        lines.append(f'  %v{n} = monarch.aten "{schema}"({operands}) on %m : '
                     f'({", ".join(types)}) -> {result}')
        return f"%v{n}"

    def rand(dims):
        shape = "x".join(map(str, dims))
        return op("aten::rand", [], [], T(shape),
                  f"array<i64: {', '.join(map(str, dims))}>, #monarch.dtype<float32>, "
                  "#monarch.none, #monarch.none, #monarch.none")

    for size in MM_SIZES:  # compute
        a, b = rand([size, size]), rand([size, size])
        for _ in range(REPS):
            op("aten::mm", [a, b], [T(f"{size}x{size}")] * 2, T(f"{size}x{size}"))
    big = [rand([ADD_ELEMENTS]) for _ in range(2)]  # memory bandwidth
    for _ in range(REPS):
        op("aten::add.Tensor", big, [T(str(ADD_ELEMENTS))] * 2, T(str(ADD_ELEMENTS)),
           "#monarch.scalar<1 : i64>")
    tiny = [rand([1]) for _ in range(2)]  # per-op launch cost
    for _ in range(TINY):
        op("aten::add.Tensor", tiny, [T("1")] * 2, T("1"), "#monarch.scalar<1 : i64>")
    for count in REDUCE_ELEMENTS:  # all-reduce, alpha-beta
        t = rand([count])
        for _ in range(REPS):
            n += 1
            lines.append(f"  %v{n} = monarch.reduce {t} (dp) sum : {T(str(count))} -> {T(str(count))}")
    lines += ["  return", "}"]
    return "\n".join(lines) + "\n"


def fit(events_by_rank, ranks):
    # The slowest rank decides a collective; compute probes use rank 0.
    def seq(rank, name):
        return [e["dur"] / 1e6 for e in events_by_rank[rank] if e["name"] == name]
    mm = seq(0, "aten::mm")
    adds = seq(0, "aten::add.Tensor")
    flops = []
    for i, size in enumerate(MM_SIZES):
        d = statistics.median(mm[i * REPS:(i + 1) * REPS])
        flops.append(2 * size ** 3 / d)
    bandwidth = 3 * 4 * ADD_ELEMENTS / statistics.median(adds[:REPS])
    launch = statistics.median(adds[REPS:REPS + TINY])
    reduces = [seq(r, "reduce") for r in range(len(events_by_rank))]
    xs, ys = [], []
    frac = (ranks - 1) / ranks
    for i, count in enumerate(REDUCE_ELEMENTS):
        per_rep = [max(r[i * REPS + k] for r in reduces) for k in range(REPS)]
        xs.append((2 * (ranks - 1), 2 * frac * 4 * count))
        ys.append(statistics.median(per_rep))
    # Least squares for t = steps * alpha + wire * beta, both >= 0.
    sxx = sum(a * a for a, _ in xs); syy = sum(b * b for _, b in xs)
    sxy = sum(a * b for a, b in xs)
    sxt = sum(a * t for (a, _), t in zip(xs, ys)); syt = sum(b * t for (_, b), t in zip(xs, ys))
    det = sxx * syy - sxy * sxy
    alpha = max((sxt * syy - syt * sxy) / det, 1e-7)
    beta = max((syt * sxx - sxt * sxy) / det, 1e-12)
    return {
        "device": "cpu",
        "flops_per_s": max(flops),
        "bytes_per_s": bandwidth,
        "launch_s": launch,
        "collectives": {"all_reduce": {"alpha_s": alpha, "bytes_per_s": 1 / beta}},
        "measured": {
            "ranks": ranks,
            "mm_flops_per_s": dict(zip(map(str, MM_SIZES), flops)),
            "all_reduce_s": dict(zip((str(4 * c) for c in REDUCE_ELEMENTS), ys)),
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monarch-run", default="build/bin/monarch-run")
    p.add_argument("--monarch-opt", default="build/bin/monarch-opt")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--write-plan", metavar="FILE", help="only compile the probe plan")
    p.add_argument("--plan", metavar="FILE", help="run this probe plan (from --write-plan)")
    p.add_argument("-o", "--output", default="-")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="monarch-calibrate-") as tmp:
        mlir = os.path.join(tmp, "probe.mlir")
        with open(mlir, "w") as f:
            f.write(program(a.ranks))
        if a.write_plan:
            subprocess.run([a.monarch_opt, mlir, f"--monarch-emit-plan=output={a.write_plan}",
                            "-o", "/dev/null"], check=True)
            return
        trace = os.path.join(tmp, "trace.json")
        cmd = [a.monarch_run, a.plan or mlir, "--trace", trace]
        if not a.plan:
            cmd.append("--no-optimize")
        done = subprocess.run(cmd, capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        # Host spans: the probes run on CPU workers, where they are the work.
        events = trace_events.of_clock(trace_events.load(trace), trace_events.HOST)
    by_rank = [[] for _ in range(a.ranks)]
    for e in sorted(events, key=lambda e: e["ts"]):
        by_rank[e["pid"]].append(e)
    profile = json.dumps(fit(by_rank, a.ranks), indent=2) + "\n"
    if a.output == "-":
        sys.stdout.write(profile)
    else:
        with open(a.output, "w") as f:
            f.write(profile)


if __name__ == "__main__":
    main()
