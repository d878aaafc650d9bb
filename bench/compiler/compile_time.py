#!/usr/bin/python3
"""Compiler and loop-lowering measurements (issue 5, "Measure").

1. Compile time of a generated 100,000-op monarch program through the full
   pipeline: `monarch-opt PROG --monarch-default-pipeline
   --monarch-emit-plan=output=PROG.plan -o /dev/null` (median of --repeat runs),
   against parsing + verifying the same file alone (`monarch-opt PROG -o
   /dev/null`) as the baseline; and the plan's size per op.
2. A 1,000-iteration loop as a recording (scf.for) vs the same body unrolled
   1,000 times: plan size and `monarch-run` wall time, as ratios, with the wall
   time of a trivial program (worker start-up) for reference.

Usage: /usr/bin/python3 bench/compiler/compile_time.py [--build build] [--ops 100000]
           [--iterations 1000] [--repeat 3] [--keep DIR]
Prints a Markdown table (docs/benchmarks.md style) and the exact commands.
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

# --------------------------------------------------------------------------
# Program generators.

MESH = "!monarch.mesh<host = 4, gpu = 8>"


def T(shape, mesh="host = 4, gpu = 8", stream=None):
    s = f', stream = "{stream}"' if stream else ""
    return f"!monarch.tensor<{shape}xf32, <{mesh}>{s}>"


def big_program(target_ops):
    """A realistic training-like program: a root mesh host=4 x gpu=8 split into
    4 pipeline stages; per stage, layers of matmul + bias + relu, a gradient-like
    all-reduce over gpu (sometimes avg over host, sometimes reduce-scatter),
    activations moved to the next stage with to_mesh, occasional fetches.
    Returns (text, number of ops in @main's body)."""
    lines = []
    ops = 0

    def op(text):
        nonlocal ops
        lines.append("  " + text)
        ops += 1

    st = "pp = 4, gpu = 8"  # the stage meshes' type: slice of the renamed split
    S = "gpu = 8"
    X = T("8x64", S)
    W = T("64x64", S)
    op(f"%m = monarch.spawn_procs : {MESH}")
    op(f"%p = monarch.rename %m (host -> pp) : {MESH}")
    for s in range(4):
        op(f"%s{s} = monarch.slice %p (pp = {s}) : !monarch.mesh<{st}>")
    nweights = 8
    for s in range(4):
        for w in range(nweights):
            op(f'%w{s}_{w} = monarch.aten "aten::randn"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %s{s} : () -> {W}')
        op(f'%b{s} = monarch.aten "aten::zeros"(array<i64: 8, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %s{s} : () -> {X}')
    op(f'%x0 = monarch.aten "aten::randn"(array<i64: 8, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %s0 : () -> {X}')
    cur = "%x0"
    stage = 0
    n = 0
    layer = 0
    while ops < target_ops - 12:
        s = stage
        w = f"%w{s}_{layer % nweights}"
        n += 1
        op(f'%h{n} = monarch.aten "aten::mm"({cur}, {w}) on %s{s} : ({X}, {W}) -> {X}')
        op(f'%a{n} = monarch.aten "aten::add.Tensor"(%h{n}, %b{s}, #monarch.scalar<1 : i64>) on %s{s} : ({X}, {X}) -> {X}')
        op(f'%r{n} = monarch.aten "aten::relu"(%a{n}) on %s{s} : ({X}) -> {X}')
        kind = n % 4
        if kind == 0:
            op(f"%g{n} = monarch.reduce %r{n} (gpu) sum : {X} -> {X}")
        elif kind == 1:
            op(f"%g{n} = monarch.reduce %r{n} (gpu) avg : {X} -> {X}")
        elif kind == 2:
            op(f"%g{n} = monarch.reduce %h{n} (gpu) sum scatter : {X} -> {T('64', S)}")
            op(f'%q{n} = monarch.aten "aten::sum"(%g{n}, #monarch.none) on %s{s} : ({T("64", S)}) -> !monarch.tensor<f32, <{S}>>')
            op(f'%g{n}x = monarch.aten "aten::add.Tensor"(%r{n}, %q{n}, #monarch.scalar<1 : i64>) on %s{s} : ({X}, !monarch.tensor<f32, <{S}>>) -> {X}')
            lines[-1] = lines[-1].replace(f"%g{n}x =", f"%g{n}y =")
            op(f'%g{n}z = monarch.aten "aten::mul.Scalar"(%g{n}y, #monarch.scalar<5.000000e-01 : f64>) on %s{s} : ({X}) -> {X}')
            cur = f"%g{n}z"
        else:
            op(f"%g{n} = monarch.reduce %r{n} (gpu) max : {X} -> {X}")
        if kind != 2:
            op(f'%y{n} = monarch.aten "aten::mul.Scalar"(%g{n}, #monarch.scalar<5.000000e-01 : f64>) on %s{s} : ({X}) -> {X}')
            cur = f"%y{n}"
        layer += 1
        if layer % 8 == 0:
            nxt = (stage + 1) % 4
            op(f"%t{n} = monarch.to_mesh {cur} to %s{nxt} : {X} -> {X}")
            cur = f"%t{n}"
            stage = nxt
        if n % 500 == 0:
            op(f"%f{n} = monarch.fetch_shard {cur} at (gpu = 3) : {X} -> !monarch.host<tensor<8x64xf32>>")
    op(f"%fend = monarch.fetch_shard {cur} : {X} -> !monarch.host<tensor<8x64xf32>>")
    text = "func.func @main() {\n" + "\n".join(lines) + "\n  return\n}\n"
    return text, ops


LOOP_T = "!monarch.tensor<4096xf32, <gpu = 2>>"


def loop_body(acc, w, out, tmp, collective=True):
    body = [f'{tmp} = monarch.aten "aten::add.Tensor"({acc}, {w}, #monarch.scalar<2 : i64>) on %m : ({LOOP_T}, {LOOP_T}) -> {LOOP_T}']
    if collective:
        body.append(f'{tmp}r = monarch.reduce {tmp} (gpu) avg : {LOOP_T} -> {LOOP_T}')
        tmp = tmp + "r"
    body.append(f'{out} = monarch.aten "aten::sub.Scalar"({tmp}, #monarch.scalar<1 : i64>, #monarch.scalar<1 : i64>) on %m : ({LOOP_T}) -> {LOOP_T}')
    return body


def loop_program(iterations, unrolled, collective=True):
    """x <- avg_gpu(x + 2w) - 1 (without the all-reduce when not `collective`),
    `iterations` times, then one fetch (value = 4096 * iterations). As scf.for
    (one recording) or unrolled."""
    head = [
        "func.func @main() {",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  %cn = arith.constant {iterations} : index",
        "  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>",
        f'  %w = monarch.aten "aten::ones"(array<i64: 4096>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> {LOOP_T}',
        f'  %x0 = monarch.aten "aten::zeros"(array<i64: 4096>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> {LOOP_T}',
    ]
    body = []
    if unrolled:
        for i in range(iterations):
            body += ["  " + l for l in loop_body(f"%x{i}", "%w", f"%x{i + 1}", f"%t{i}", collective)]
        result = f"%x{iterations}"
    else:
        body.append(f"  %x = scf.for %i = %c0 to %cn step %c1 iter_args(%acc = %x0) -> ({LOOP_T}) {{")
        body += ["    " + l for l in loop_body("%acc", "%w", "%n", "%t", collective)]
        body.append(f"    scf.yield %n : {LOOP_T}")
        body.append("  }")
        result = "%x"
    tail = [
        f'  %s = monarch.aten "aten::sum"({result}, #monarch.none) on %m : ({LOOP_T}) -> !monarch.tensor<f32, <gpu = 2>>',
        "  %f = monarch.fetch_shard %s : !monarch.tensor<f32, <gpu = 2>> -> !monarch.host<tensor<f32>>",
        "  return",
        "}",
    ]
    return "\n".join(head + body + tail) + "\n"


TRIVIAL = """func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %x = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<4xf32, <gpu = 2>>
  %f = monarch.fetch_shard %x : !monarch.tensor<4xf32, <gpu = 2>> -> !monarch.host<tensor<4xf32>>
  return
}
"""

# --------------------------------------------------------------------------


def timed(cmd, repeat, check_stdout=None):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit(f"failed ({p.returncode}): {shlex.join(cmd)}\n{p.stderr[-2000:]}")
        if check_stdout and check_stdout not in p.stdout:
            sys.exit(f"unexpected output of {shlex.join(cmd)}: {p.stdout[-500:]} (wanted {check_stdout!r})")
    return statistics.median(times), times


def instructions(opt, prog, pipeline):
    """Instruction count of the plan (text form: one line per instruction)."""
    cmd = [opt, prog] + (["--monarch-default-pipeline"] if pipeline else []) + [
        "--monarch-emit-plan=format=text", "-o", "/dev/null"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True).stdout
    return sum(1 for l in out.splitlines() if "// #" in l)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="write the generated programs and plans here")
    ap.add_argument("--skip-run", action="store_true", help="no monarch-run measurements")
    args = ap.parse_args()
    opt = os.path.abspath(os.path.join(args.build, "bin", "monarch-opt"))
    run = os.path.abspath(os.path.join(args.build, "bin", "monarch-run"))
    work = args.keep or tempfile.mkdtemp(prefix="monarch-compile-bench-")
    os.makedirs(work, exist_ok=True)
    commands = []
    rows = []

    # 1. Compile time of a 100,000-op program.
    text, nops = big_program(args.ops)
    prog = os.path.join(work, "big.mlir")
    plan = os.path.join(work, "big.plan")
    open(prog, "w").write(text)
    parse_cmd = [opt, prog, "-o", "/dev/null"]
    full_cmd = [opt, prog, "--monarch-default-pipeline", f"--monarch-emit-plan=output={plan}", "-o", "/dev/null"]
    lower_cmd = [opt, prog, f"--monarch-emit-plan=output={plan}.noopt", "-o", "/dev/null"]
    commands += [shlex.join(parse_cmd), shlex.join(lower_cmd), shlex.join(full_cmd)]
    t_parse, _ = timed(parse_cmd, args.repeat)
    t_lower, _ = timed(lower_cmd, args.repeat)
    t_full, all_full = timed(full_cmd, args.repeat)
    plan_bytes = os.path.getsize(plan)
    # Where the time goes (one more run, --mlir-timing): "Output" is printing
    # the module to /dev/null, which monarch-run's in-process compile skips.
    timing = subprocess.run(full_cmd + ["--mlir-timing"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True).stderr
    breakdown = []
    for l in timing.splitlines():
        parts = l.split()
        if len(parts) >= 3 and parts[1].startswith("(") and parts[-1] not in ("Total",):
            breakdown.append(f"{parts[-1]} {float(parts[0]):.2f}")
    total = next((float(l.split()[0]) for l in timing.splitlines() if l.strip().endswith("Total")), None)
    output = next((float(l.split()[0]) for l in timing.splitlines() if l.strip().endswith("Output")), 0.0)
    ninst = instructions(opt, prog, pipeline=True)
    rows.append(("compile: parse + verify only (baseline)", f"{t_parse:.3f} s", f"{nops:,} ops, {len(text.encode()) / 1e6:.1f} MB of .mlir"))
    rows.append(("compile: parse + lowering to plan (no pipeline)", f"{t_lower:.3f} s", f"{t_lower / t_parse:.2f}x the parse"))
    rows.append(("compile: full (default pipeline + lowering + write)", f"{t_full:.3f} s",
                 f"{t_full / t_parse:.2f}x the parse; {nops / t_full:,.0f} ops/s; runs: " + ", ".join(f"{t:.3f}" for t in all_full)))
    if total is not None:
        rows.append(("compile: full, without printing the IR (from --mlir-timing)", f"{total - output:.3f} s",
                     "one run: " + ", ".join(breakdown)))
    # monarch-run's in-process compile (what a run does, without printing the
    # IR), from the text and from MLIR bytecode (how a tool hands a large
    # generated program over: the parser is most of the text path).
    bytecode = os.path.join(work, "big.mlirbc")
    subprocess.run([opt, prog, "--emit-bytecode", "-o", bytecode], check=True)
    for label, src in (("text", prog), ("bytecode", bytecode)):
        cmd = [run, src, "--emit-plan", plan + "." + label]
        commands.append(shlex.join(cmd))
        t, all_t = timed(cmd, args.repeat)
        rows.append((f"compile: monarch-run --emit-plan from {label} (full pipeline, whole process)",
                     f"{t:.3f} s", "runs: " + ", ".join(f"{x:.3f}" for x in all_t)))
    rows.append(("plan size per op (full pipeline)", f"{plan_bytes / nops:.1f} B/op",
                 f"{plan_bytes:,} bytes, {ninst:,} instructions ({plan_bytes / ninst:.1f} B/instruction)"))

    # How much of the plan is source locations (every instruction carries its
    # location string, the file's full path included).
    noloc = plan + ".noloc"
    noloc_cmd = [opt, prog, "--strip-debuginfo", "--monarch-default-pipeline",
                 f"--monarch-emit-plan=output={noloc}", "-o", "/dev/null"]
    commands.append(shlex.join(noloc_cmd))
    subprocess.run(noloc_cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    nl = os.path.getsize(noloc)
    rows.append(("plan size per op without locations (--strip-debuginfo)", f"{nl / nops:.1f} B/op",
                 f"{nl:,} bytes: locations ({len(prog)}-character path) are {1 - nl / plan_bytes:.0%} of the plan"))

    # 2. 1,000-iteration loop: recording vs unrolled, with an all-reduce in the
    # body and compute only. monarch-run runs are interleaved (recording,
    # unrolled, trivial, ...) so that load changes hit every variant alike.
    n = args.iterations
    variants = [(f"{kind}_{form}", form == "unrolled", kind == "allreduce")
                for kind in ("allreduce", "compute") for form in ("recording", "unrolled")]
    sizes, run_cmds = {}, {}
    for name, unrolled, collective in variants:
        p = os.path.join(work, f"loop_{name}.mlir")
        open(p, "w").write(loop_program(n, unrolled, collective))
        pl = os.path.join(work, f"loop_{name}.plan")
        cmd = [opt, p, "--monarch-default-pipeline", f"--monarch-emit-plan=output={pl}", "-o", "/dev/null"]
        commands.append(shlex.join(cmd))
        t_compile, _ = timed(cmd, args.repeat)
        sizes[name] = (os.path.getsize(pl), instructions(opt, p, pipeline=True), t_compile)
        run_cmds[name] = [run, p]
    tp = os.path.join(work, "trivial.mlir")
    open(tp, "w").write(TRIVIAL)
    run_cmds["trivial"] = [run, tp]
    walls = {}
    if not args.skip_run:
        commands += [shlex.join(c) for c in run_cmds.values()]
        samples = {k: [] for k in run_cmds}
        for _ in range(args.repeat):
            for name, cmd in run_cmds.items():
                # x_k = k on every element: the fetched sum is 4096 * n.
                want = "tensor<4xf32> [1, 1, 1, 1]" if name == "trivial" else f"tensor<f32> {4096 * n:g}"
                samples[name].append(timed(cmd, 1, check_stdout=want)[0])
        walls = {k: statistics.median(v) for k, v in samples.items()}
    for kind, label in (("allreduce", "body with an all-reduce"), ("compute", "compute-only body")):
        rec, unr = f"{kind}_recording", f"{kind}_unrolled"
        (rs, ri, rc), (us, ui, uc) = sizes[rec], sizes[unr]
        rows.append((f"{n}-iteration loop ({label}): plan size, recording / unrolled",
                     f"{rs:,} B / {us:,} B", f"{ri:,} / {ui:,} instructions; compile {rc:.3f} s / {uc:.3f} s"))
        rows.append((f"  plan size ratio unrolled / recording ({label})", f"{us / rs:.2f}x", ""))
        if walls:
            t = walls["trivial"]
            rows.append((f"{n}-iteration loop ({label}): monarch-run wall, recording / unrolled",
                         f"{walls[rec]:.2f} s / {walls[unr]:.2f} s",
                         "gpu=2 (2 workers); runs: " + ", ".join(f"{x:.2f}" for x in samples[rec]) + " / "
                         + ", ".join(f"{x:.2f}" for x in samples[unr])))
            net = (f"{(walls[unr] - t) / (walls[rec] - t):.2f}x" if walls[rec] > t * 1.1 and walls[unr] > t * 1.1
                   else "n/a (within start-up noise)")
            rows.append((f"  wall ratio unrolled / recording ({label})", f"{walls[unr] / walls[rec]:.2f}x",
                         f"without start-up ({t:.2f} s, a one-op program): {net}"))

    print(f"median of {args.repeat} runs each; files in {work}\n")
    print("| measurement | value | notes |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    print("\ncommands:")
    for c in commands:
        print("  " + c)
    print("\nload: " + subprocess.run(["uptime"], stdout=subprocess.PIPE, text=True).stdout.strip())


if __name__ == "__main__":
    main()
