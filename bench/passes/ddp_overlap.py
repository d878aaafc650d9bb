#!/usr/bin/env python3
"""Real (not simulated) effect of the compiler's overlap passes on a DDP step.

Generates a DDP training program written the naive way (per layer: gradient,
in-place all-reduce over "dp", SGD update; examples/ddp_step.mlir is one step
of it), runs it with monarch-run on CPU worker processes twice -- as written
(`--no-optimize`) and through the default pipeline (all-reduces started on a
"comm" stream thread, waited for just before each update) -- and compares the
steady-state step time measured from monarch-run's --trace: by default the
time between the steps' starts after the warm-up steps, on the slowest rank
(`--timer` has two older measures that subtract a warm-up run, whose start-up
jitter enters the result). With `--device cuda` the trace's device-time events
are used (when the work ran on the GPU; the host-side spans there are launch
times).

    /usr/bin/python3 bench/passes/ddp_overlap.py --monarch-run build/bin/monarch-run \
        --ranks 2 --layers 8 --hidden 512 --batch 64 --steps 4 --reps 5

Where monarch-run is built without the compiler (the GPU machine), compile
the plans elsewhere with --write-plans DIR (uses monarch-opt) and run them
there with --plans DIR.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "monarch-run"))
import trace_events  # noqa: E402


def program(ranks: int, layers: int, hidden: int, batch: int, steps: int,
            form: str = "naive", device: str = "cpu") -> str:
    """`naive`: Monarch's DDP loop (1) as traced -- per layer the gradient, its
    in-place all-reduce, the update. `handwritten`: schedule (3) of Monarch's
    docs -- each gradient borrowed onto a "comm" stream and all-reduced there
    as soon as it exists, the borrows dropped just before the updates at the
    end of the backward pass."""
    mesh = f"!monarch.mesh<dp = {ranks}>"
    W = f"!monarch.tensor<{hidden}x{hidden}xf32, <dp = {ranks}>>"
    X = f"!monarch.tensor<{batch}x{hidden}xf32, <dp = {ranks}>>"
    L = f"!monarch.tensor<f32, <dp = {ranks}>>"
    WC = f"!monarch.tensor<{hidden}x{hidden}xf32, <dp = {ranks}>, stream = \"comm\">"
    lines = [f"func.func @main() -> !monarch.host<tensor<f32>> {{",
             f"  %m = monarch.spawn_procs : {mesh}"]
    if form == "handwritten":
        lines.append('  %comm = monarch.stream_create : !monarch.stream<"comm">')
    n = 0

    def fresh() -> str:
        nonlocal n
        n += 1
        return f"%v{n}"

    def aten(schema: str, args: list, types: list, result: str, consts: str = "") -> str:
        r = fresh()
        operands = ", ".join(args + ([consts] if consts else []))
        lines.append(f'  {r} = monarch.aten "{schema}"({operands}) on %m : '
                     f'({", ".join(types)}) -> {result}')
        return r

    def rand(shape: str, ty: str) -> str:
        return aten("aten::rand", [], [], ty,
                    f"array<i64: {shape}>, #monarch.dtype<float32>, #monarch.none, "
                    f"{dev}, #monarch.none")

    dev = "#monarch.none" if device == "cpu" else f'#monarch.device<"{device}">'
    ws = [rand(f"{hidden}, {hidden}", W) for _ in range(layers)]
    pending = []
    x = rand(f"{batch}, {hidden}", X)
    loss = None
    for _ in range(steps):
        hs, acts = [], [x]
        for w in ws:  # forward: h = a @ w, a' = relu(h)
            h = aten("aten::mm", [acts[-1], w], [X, W], X)
            hs.append(h)
            acts.append(aten("aten::relu", [h], [X], X))
        loss = aten("aten::sum", [acts[-1]], [X], L, "#monarch.none")
        d = aten("aten::ones_like", [acts[-1]], [X], X,
                 ", ".join(["#monarch.none"] * 5))
        for i in reversed(range(layers)):  # backward, naive DDP per layer
            d = aten("aten::threshold_backward", [d, hs[i]], [X, X], X,
                     "#monarch.scalar<0 : i64>")
            at = aten("aten::t", [acts[i]], [X],
                      f"!monarch.tensor<{hidden}x{batch}xf32, <dp = {ranks}>>")
            g = aten("aten::mm", [at, d],
                     [f"!monarch.tensor<{hidden}x{batch}xf32, <dp = {ranks}>>", X], W)
            if i > 0:
                wt = aten("aten::t", [ws[i]], [W], W)
                d = aten("aten::mm", [d, wt], [X, W], X)
            if form == "handwritten":
                gc, tok, r = fresh(), fresh(), fresh()
                lines.append(f"  {gc}, {tok} = monarch.borrow {g} to %comm mutable : {W} -> {WC}")
                lines.append(f"  monarch.borrow_first_use {tok}")
                lines.append(f"  {r} = monarch.reduce {gc} (dp) sum inplace : {WC} -> {WC}")
                lines.append(f"  monarch.borrow_last_use {tok}")
                pending.append((i, g, tok))
                continue
            r = fresh()
            lines.append(f"  {r} = monarch.reduce {g} (dp) sum inplace : {W} -> {W}")
            ws[i] = aten("aten::sub_.Tensor", [ws[i], r], [W, W], W,
                         "#monarch.scalar<1.000000e-03 : f64>")
        for i, g, tok in pending:  # (3): drop just before each update
            lines.append(f"  monarch.borrow_drop {tok}")
            ws[i] = aten("aten::sub_.Tensor", [ws[i], g], [W, W], W,
                         "#monarch.scalar<1.000000e-03 : f64>")
        pending.clear()
    v = fresh()
    lines.append(f"  {v} = monarch.inspect {loss} at (dp = 0) : {L} -> !monarch.host<tensor<f32>>")
    lines.append(f"  return {v} : !monarch.host<tensor<f32>>")
    lines.append("}")
    return "\n".join(lines) + "\n"


FORMS = (("naive", []), ("optimized", ["--monarch-default-pipeline"]))


def write_plans(monarch_opt: str, mlirs: dict, out_dir: str) -> None:
    """`mlirs`: plan-name suffix ("" or "-warmup") -> program."""
    os.makedirs(out_dir, exist_ok=True)
    for suffix, mlir in mlirs.items():
        for name, passes in FORMS:
            out = os.path.join(out_dir, name + suffix + ".plan")
            subprocess.run([monarch_opt, mlir, "--canonicalize", "--monarch-resolve-mesh-views",
                            *passes, f"--monarch-emit-plan=output={out}", "-o", "/dev/null"],
                           check=True)


def run_monarch(monarch_run: str, program: str, optimize: bool, tmp: str, bind: bool,
                keep: str = "", traced: bool = True, device: bool = False) -> Tuple[float, list]:
    """Runs `program`; its wall time (ms) and, when `traced`, its trace's
    events (the device-time ones with `device`, which must then be present).
    `bind` pins each worker to its share of the cores; `keep`: where to keep
    the trace (empty: a scratch file)."""
    trace = keep or os.path.join(tmp, "trace.json")
    cmd = [monarch_run, program] + (["--trace", trace] if traced else [])
    if program.endswith(".mlir") and not optimize:
        cmd.append("--no-optimize")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if bind:
        env["MONARCH_BIND_CORES"] = "1"
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = (time.monotonic() - start) * 1e3
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    if not traced:
        return wall, []
    events, clock = trace_events.preferred(trace_events.load(trace), device)
    if device and clock != trace_events.GPU:
        sys.exit(f"{trace}: no device-time events (is monarch-run built against a "
                 "torch with CUDA, and are the ranks on GPUs?)")
    return wall, events


def span_ms(monarch_run: str, program: str, optimize: bool, tmp: str, bind: bool,
            keep: str = "", timer: str = "trace",
            device: bool = False) -> Tuple[float, Dict[Tuple[int, str], float]]:
    """First instruction start to last instruction end of the slowest rank (ms),
    and busy_by_op; with `timer` "wall", the wall time of the whole monarch-run
    without --trace (nothing sent per instruction) and no breakdown."""
    wall, events = run_monarch(monarch_run, program, optimize, tmp, bind, keep,
                               timer != "wall", device)
    if timer == "wall":
        return wall, {}
    spans = trace_events.rank_spans(events)
    return max(hi - lo for lo, hi in spans.values()) / 1e3, busy_by_op(events, len(spans))


# One per step in both forms (it seeds the backward pass), so its starts mark
# the steps wherever the scheduler puts it.
STEP_MARK = "aten::ones_like"


def steady_steps(events: list, skip: int) -> Tuple[float, Dict[Tuple[int, str], float]]:
    """ms per step from one run's trace: on each rank, the time from the
    `skip`-th step's STEP_MARK to the last one, over the steps between (the
    slowest rank's), and busy_by_op per step over the same window. Unlike the
    difference of two runs' spans, start-up (process, CUDA, NCCL set-up) does
    not enter at all."""
    marks: Dict[int, List[float]] = {}
    for e in events:
        if e["name"] == STEP_MARK:
            marks.setdefault(e["pid"], []).append(e["ts"])
    windows = {}
    for pid, ts in marks.items():
        ts.sort()
        if len(ts) < skip + 2:
            sys.exit(f"{len(ts)} steps on rank {pid}: too few to skip {skip} and time one")
        windows[pid] = (ts[skip], ts[-1], len(ts) - 1 - skip)
    step = max((hi - lo) / n for lo, hi, n in windows.values()) / 1e3
    inside = [e for e in events if e["pid"] in windows
              and windows[e["pid"]][0] <= e["ts"] < windows[e["pid"]][1]]
    steps = next(iter(windows.values()))[2]
    busy = {k: v / steps for k, v in busy_by_op(inside, len(windows)).items()}
    return step, busy


def busy_by_op(events: list, ranks: int) -> Dict[Tuple[int, str], float]:
    """ms spent per (stream, instruction name), averaged over the ranks: where
    a step's time goes (on the comm stream `borrow_first_use` is waiting for
    a gradient, on the main stream `borrow_drop` waiting for its reduce)."""
    busy: Dict[Tuple[int, str], float] = {}
    for e in events:
        key = (trace_events.stream(e), e["name"])
        busy[key] = busy.get(key, 0.0) + e["dur"] / 1e3 / ranks
    return busy


def step_time(monarch_run: str, programs: dict, optimize: bool, steps: int, tmp: str,
              bind: bool = False, keep: str = "", timer: str = "trace",
              device: bool = False, warmup: int = 1) -> Tuple[float, Dict[Tuple[int, str], float]]:
    """Steady-state ms per step. `timer` "steps": from the full run's trace
    alone (steady_steps, its first `warmup` steps left out). Otherwise the span
    (or wall time) of warm-up + `steps` steps minus that of the warm-up alone
    (connection set-up, first-touch allocations), over `steps`; without a
    warm-up program, the whole span over `steps`. With it, busy_by_op per
    step, the same difference."""
    if timer == "steps":
        _, events = run_monarch(monarch_run, programs[""], optimize, tmp, bind,
                                keep and keep + ".json", True, device)
        return steady_steps(events, warmup)
    total, busy = span_ms(monarch_run, programs[""], optimize, tmp, bind,
                          keep and keep + ".json", timer, device)
    if "-warmup" not in programs:
        return total / steps, {k: v / steps for k, v in busy.items()}
    warmup_ms, warm_busy = span_ms(monarch_run, programs["-warmup"], optimize, tmp, bind,
                                   keep and keep + "-warmup.json", timer, device)
    return ((total - warmup_ms) / steps,
            {k: (v - warm_busy.get(k, 0.0)) / steps for k, v in busy.items()})


def breakdown_table(naive: list, optimized: list, rows: int = 8) -> None:
    """Per step, the median ms of the busiest (stream, instruction) pairs of
    each form: whether overlap slowed the compute down, and how long each
    stream waited for the other."""
    med = lambda runs, k: statistics.median(b.get(k, 0.0) for _, b in runs)
    keys = {k for _, b in naive + optimized for k in b}
    top = sorted(keys, key=lambda k: -max(med(naive, k), med(optimized, k)))[:rows]
    print("| stream, instruction | naive ms/step | optimized ms/step |")
    print("|---|---|---|")
    for k in top:
        print(f"| {k[0]}, {k[1]} | {med(naive, k):.2f} | {med(optimized, k):.2f} |")


def simulate(monarch_opt: str, mlir: str, profile: str, optimize: bool) -> dict:
    """--monarch-simulate's prediction: step time and per-stream busy time (us)."""
    passes = [f"--monarch-default-pipeline=profile={profile}"] if optimize else []
    done = subprocess.run([monarch_opt, mlir, *passes, f"--monarch-simulate=profile={profile}",
                           "-o", "/dev/null"], capture_output=True, text=True, check=True)
    remark = next(l for l in done.stderr.splitlines() if "simulated step" in l)
    step = float(re.search(r"simulated step ([0-9.]+)us", remark).group(1))
    busy = {name.strip('"'): float(us) for name, us in
            re.findall(r'stream ("[^"]*"|\w+): busy ([0-9.]+)us', remark)}
    return {"step": step, "busy": busy}


def simulated_table(a, tmp: str) -> None:
    print(f"simulated (--monarch-simulate, profile {a.simulate}), step time in ms:")
    print("| config | naive (1) | optimized (default pipeline) | hand-written (3) | "
          "max(compute, comm) | optimized / max | optimized / (3) |")
    print("|---|---|---|---|---|---|---|")
    for batch in a.batches:
        forms = {}
        for form in ("naive", "handwritten"):
            path = os.path.join(tmp, f"{form}{batch}.mlir")
            with open(path, "w") as f:
                f.write(program(a.ranks, a.layers, a.hidden, batch, 1, form))
            forms[form] = path
        naive = simulate(a.monarch_opt, forms["naive"], a.simulate, False)
        opt = simulate(a.monarch_opt, forms["naive"], a.simulate, True)
        hand = simulate(a.monarch_opt, forms["handwritten"], a.simulate, False)
        bound = max(opt["busy"].values())
        print(f"| {a.layers} layers {a.hidden}x{a.hidden}, batch {batch}, dp={a.ranks} "
              f"| {naive['step'] / 1e3:.2f} | {opt['step'] / 1e3:.2f} | {hand['step'] / 1e3:.2f} "
              f"| {bound / 1e3:.2f} | {opt['step'] / bound:.3f} | {opt['step'] / hand['step']:.3f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monarch-run", default="build/bin/monarch-run")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=4, help="measured steps")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (one rank per GPU)")
    p.add_argument("--bind", action="store_true",
                   help="pin each worker to its share of the cores (MONARCH_BIND_CORES=1)")
    p.add_argument("--warmup", type=int, default=1,
                   help="steps run before the measured ones and subtracted (0: none)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--timer", choices=("steps", "trace", "wall"), default="steps",
                   help="steps: from one run's trace, the time between the steps' starts "
                        "after the warm-up steps; trace: the difference of the trace spans of "
                        "a warm-up + steps run and a warm-up run; wall: the same difference of "
                        "monarch-run's wall times, without tracing")
    p.add_argument("--keep-traces", metavar="DIR",
                   help="keep every run's trace as DIR/{naive,optimized}-REP[-warmup].json")
    p.add_argument("--monarch-opt", default="build/bin/monarch-opt")
    p.add_argument("--write-plans", metavar="DIR", help="only compile naive/optimized.plan")
    p.add_argument("--plans", metavar="DIR", help="run DIR/naive.plan and DIR/optimized.plan")
    p.add_argument("--simulate", metavar="PROFILE",
                   help="no run: predict naive, optimized and hand-written (3) with this cost profile")
    p.add_argument("--batches", type=int, nargs="+", default=[16, 128],
                   help="with --simulate: the batch sizes to compare")
    a = p.parse_args()
    if a.simulate:
        with tempfile.TemporaryDirectory(prefix="monarch-ddp-") as tmp:
            simulated_table(a, tmp)
        return
    with tempfile.TemporaryDirectory(prefix="monarch-ddp-") as tmp:
        mlirs = {}
        for suffix, steps in (("", a.warmup + a.steps), ("-warmup", a.warmup)):
            if steps == 0:
                continue
            mlirs[suffix] = os.path.join(tmp, f"ddp{suffix}.mlir")
            with open(mlirs[suffix], "w") as f:
                f.write(program(a.ranks, a.layers, a.hidden, a.batch, steps,
                                device=a.device))
        if a.write_plans:
            write_plans(a.monarch_opt, mlirs, a.write_plans)
            return
        if a.plans:
            first = {s: os.path.join(a.plans, f"naive{s}.plan") for s in mlirs}
            second = {s: os.path.join(a.plans, f"optimized{s}.plan") for s in mlirs}
        else:
            first = second = mlirs
        naive, optimized = [], []
        if a.keep_traces:
            os.makedirs(a.keep_traces, exist_ok=True)
        keep = lambda form, rep: os.path.join(a.keep_traces, f"{form}-{rep}") if a.keep_traces else ""
        on_gpu = a.device.startswith("cuda")
        if on_gpu and a.timer == "wall":
            sys.exit("--timer wall times the host; a CUDA run is timed by its device events")
        for rep in range(a.reps):  # interleaved, so drifting load hits both
            naive.append(step_time(a.monarch_run, first, False, a.steps, tmp, a.bind,
                                   keep("naive", rep), a.timer, on_gpu, a.warmup))
            optimized.append(step_time(a.monarch_run, second, True, a.steps, tmp, a.bind,
                                       keep("optimized", rep), a.timer, on_gpu, a.warmup))
    if a.timer != "wall":
        breakdown_table(naive, optimized)
    naive, optimized = [s for s, _ in naive], [s for s, _ in optimized]
    n, o = statistics.median(naive), statistics.median(optimized)
    ratios = sorted(x / y for x, y in zip(naive, optimized))
    clock = "device time (GPU trace events)" if on_gpu else "host time"
    print(f"DDP {a.layers} layers {a.hidden}x{a.hidden}, batch {a.batch}, dp={a.ranks}, "
          f"device {a.device}, step time by {clock}, "
          f"{a.steps} steps after {a.warmup} warm-up{', cores bound' if a.bind else ''}, "
          f"{a.timer} timer, median of {a.reps}; per-run speed-ups "
          f"{' '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f}x)")
    print(f"| naive (as written) | optimized (default pipeline) | speed-up |")
    print(f"|---|---|---|")
    print(f"| {n:.2f} ms/step | {o:.2f} ms/step | {n / o:.2f}x |")
    print("all runs (naive / optimized ms):",
          " ".join(f"{x:.1f}/{y:.1f}" for x, y in zip(naive, optimized)))


if __name__ == "__main__":
    main()
