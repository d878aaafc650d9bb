#!/usr/bin/env python3
"""Traces the pipeline job once, compiles it with monarch-opt and runs it with
monarch-run; prints the loss per step and a summary (step time, pipeline
bubble measured from the monarch-run trace vs the theoretical (p-1)/(m+p-1)).

    PYTHONPATH=build/python /usr/bin/python3 examples/pipeline/run.py [--steps 20]
        [--pp 2 --dp 2 --microbatches 4 --batch 16 --hidden 32 --layers 2]
        [--model mlp|transformer] [--optimizer sgd|adam] [--schedule gpipe|1f1b]
        [--pass-schedule none|gpipe|1f1b] [--out DIR] [--eager] [--reference]
        [--widths 32,32,256,... --partition auto|N,N,...] [--device cpu|cuda] [--no-run]
    PYTHONPATH=build/python /usr/bin/python3 examples/pipeline/run.py --loop
        [--steps 10000] [same model options] [--reference]
    PYTHONPATH=build/python /usr/bin/python3 examples/pipeline/run.py --compiled-step
        [--steps 10000] [same model options] [--reference]

The second and third forms are the documented ways to run a long job. With
``--loop`` the steps are one ``monarch.range`` loop (docs/python.md "Loops"):
the trace holds two steps and the plan one loop instruction, whatever
``--steps`` is. With ``--compiled-step`` the training step is
``monarch.compile``d (docs/python.md "Compiled steps") and called from a Python
loop -- traced on its first calls, then one instruction per step. Either way
nothing grows with the number of steps. See docs/pipeline.md.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "monarch-run"))

import model  # noqa: E402
import trace_events  # noqa: E402


def find_tool(name: str, env: str) -> str:
    p = os.environ.get(env)
    if p:
        return p
    d = HERE
    for _ in range(4):
        d = os.path.dirname(d)
        for build in ("build", "build-compiler", "build-py"):
            c = os.path.join(d, build, "bin", name)
            if os.path.exists(c):
                return c
    p = shutil.which(name)
    if p is None:
        raise FileNotFoundError(f"{name} not found: build it or set ${env}")
    return p


# -- trace, compile, run ------------------------------------------------------------------

def trace_job(cfg: model.Config) -> str:
    """The job's IR (tests and benches that want the text)."""
    return record_job(cfg).to_mlir()


def record_job(cfg: model.Config, looped: bool = False) -> Any:
    """The job traced once: a monarch.Trace (its ``traced`` bytes are what
    monarch-opt compiles; ``to_mlir()`` prints them as IR). ``looped``: the
    steps are one ``monarch.range`` loop (the plan's size does not depend
    on the number of steps)."""
    import monarch

    return monarch.trace(model.program, cfg, None, looped)


def compile_job(mlir_path: str, plan_path: str, opt: str, pass_schedule: str = "none",
                pipeline_options: str = "") -> List[str]:
    passes = []
    if pass_schedule != "none":
        passes.append(f"--monarch-pipeline-schedule=schedule={pass_schedule}")
    dp = "--monarch-default-pipeline" + (f"={pipeline_options}" if pipeline_options else "")
    passes.append(dp)
    cmd = [opt, mlir_path, *passes, f"--monarch-emit-plan=output={plan_path}",
           "-o", os.path.splitext(plan_path)[0] + ".opt.mlir"]
    subprocess.run(cmd, check=True)
    return cmd


FETCH_RE = re.compile(r"^fetch #(\d+) rank (\d+) \(([^)]*)\): tensor<f32> (\S+)")


def run_job(plan_path: str, trace_path: Optional[str], runner: str,
            timeout: int = 600) -> Tuple[List[float], List[int], float, List[str]]:
    cmd = [runner, plan_path]
    if trace_path:
        cmd += ["--trace", trace_path]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"monarch-run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    losses, ids = parse_losses(proc.stdout)
    return losses, ids, wall, cmd


def parse_losses(stdout: str) -> Tuple[List[float], List[int]]:
    """The fetched losses and their fetch instruction ids from monarch-run's output."""
    losses, ids = [], []
    for line in stdout.splitlines():
        m = FETCH_RE.match(line)
        if m:
            ids.append(int(m.group(1)))
            losses.append(float(m.group(4)))
    return losses, ids


# -- the trace ---------------------------------------------------------------------------

def _line_ranges() -> Dict[str, List[Tuple[int, int]]]:
    """Lines of model.py by phase: 'pipeline' (forward/backward of a
    microbatch, module forwards, the loss) and everything else."""
    src = open(os.path.join(HERE, "model.py")).read()
    tree = ast.parse(src)
    pipe: List[Tuple[int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in ("forward", "backward"):
            pipe.append((node.lineno, node.end_lineno or node.lineno))
    return {"pipeline": pipe}


SEND_SOURCE: Dict[int, int] = {}   # send_tensor instruction -> source stage


def instruction_phases(plan_path: str) -> Dict[int, str]:
    from monarch._src.backend.plan import plan

    program = plan.Program()
    with open(plan_path, "rb") as f:
        program.ParseFromString(f.read())
    pipe = _line_ranges()["pipeline"]
    out = {}
    offsets = {m.id: m.offset for m in program.meshes}
    offsets[0] = 0
    stride = 1
    for d in list(program.root)[1:]:
        stride *= d.size
    for inst in program.instructions:
        if inst.WhichOneof("kind") == "send_tensor":
            SEND_SOURCE[inst.id] = offsets.get(inst.send_tensor.source_mesh, 0) // stride
        m = re.match(r"(.*?):(\d+)(?::\d+)?$", inst.location)
        phase = "other"
        if m and m.group(1).endswith("model.py"):
            line = m.group(2)
            n = int(line)
            if any(a <= n <= b for a, b in pipe):
                phase = "pipeline"
        out[inst.id] = phase
    return out


def analyze(trace_path: str, plan_path: str, fetch_ids: List[int], cfg: model.Config) -> dict:
    """Step time and bubble fraction from the monarch-run trace.

    Step time: the interval between consecutive loss fetches (they close the
    steps in program order). For the bubble, each rank's forward/backward
    instructions (by their location in model.py) are split into steps by its
    transfers: every step moves 2m tensors across each boundary of the stage,
    and a stage may start the next step's forward before the previous loss is
    fetched (the compiler does not pin compute to fetches), so instruction ids
    do not separate steps. In each step the pipeline window is the span of
    those instructions over all ranks; a stage is busy while it runs one that
    is not a transfer (send_tensor: waiting for the peer; on the default
    stream or, after stream assignment, on the comm stream), a ref deletion
    or a borrow event (a wait for the other stream); its bubble is
    1 - busy / window.

    A CUDA run's trace has device-time events (when each instruction's work
    ran on the GPU): then all of this uses them ("clock": "gpu" in the
    result), since its host-side spans are launch times; else the host spans."""
    loaded = trace_events.load(trace_path)
    events, clock = trace_events.preferred(loaded)
    launched = launch_order(loaded) if clock != trace_events.HOST else {}
    phases = instruction_phases(plan_path)
    bounds = sorted(fetch_ids)
    P, D, M = cfg.pp, cfg.dp, cfg.microbatches
    n = len(bounds)

    fetch_ts: Dict[int, float] = {}
    per_rank: Dict[int, List[dict]] = {}
    for e in events:
        i = e["args"]["instruction"]
        if e["name"] == "fetch" and i in bounds:
            fetch_ts[i] = max(fetch_ts.get(i, 0.0), e["ts"] + e["dur"])
        # The default stream's compute, and the transfers wherever they run
        # (on the comm stream once --monarch-assign-streams moves them);
        # borrow events are waits and event records, not compute.
        if (phases.get(i) == "pipeline" and e["name"] != "delete_refs"
                and not e["name"].startswith("borrow_")
                and (trace_events.stream(e) == 0 or e["name"] == "send_tensor")):
            per_rank.setdefault(e["pid"], []).append(e)
    # step of each event: that of the next transfer on its rank
    by_step: Dict[Tuple[int, int], List[dict]] = {}   # (step, rank) -> events in ts order
    for pid, es in per_rank.items():
        # In the order the ranks ran them: the host's (launch) order where
        # the spans are device times -- two streams' kernels overlap on the
        # GPU, and their device order would put transfers in other steps.
        es.sort(key=lambda e: launched.get(id(e), e["ts"]))
        stage = pid // D                                # root mesh (pp, dp), row-major
        boundaries = (stage > 0) + (stage < P - 1)
        per_step = 2 * M * max(boundaries, 1)
        k, pending = 0, []
        for e in es:
            pending.append(e)
            if e["name"] == "send_tensor":
                by_step.setdefault((k // per_step, pid), []).extend(pending)
                pending, k = [], k + 1
        if pending:
            by_step.setdefault((max(k - 1, 0) // per_step, pid), []).extend(pending)

    bubbles, windows, per_step_stages = [], [], []
    for s in range(1, n):                               # step 0 includes the set-up
        evs = [e for r in range(P * D) for e in by_step.get((s, r), [])]
        if not evs:
            continue
        lo = min(e["ts"] for e in evs)
        hi = max(e["ts"] + e["dur"] for e in evs)
        busy = [0.0] * P
        for r in range(P * D):
            busy[r // D] += sum(e["dur"] for e in by_step.get((s, r), [])
                                if e["name"] != "send_tensor") / D
        if hi > lo:
            bubbles.append([1 - b / (hi - lo) for b in busy])
            windows.append((hi - lo) / 1e3)
        per_step_stages.append([by_step.get((s, st * D), []) for st in range(P)])
    replayed = [r for r in (replay_bubble(x) for x in per_step_stages) if r is not None]
    buffered = [r for r in (replay_bubble(x, buffered=True) for x in per_step_stages)
                if r is not None]
    ends = [fetch_ts[b] for b in bounds if b in fetch_ts]
    steps_t = [(ends[k] - ends[k - 1]) / 1e3 for k in range(1, len(ends))]  # ms, steps 1..
    per_stage = [statistics.mean(b[i] for b in bubbles) for i in range(P)] if bubbles else []
    return {
        "clock": clock,
        "step_ms": statistics.median(steps_t) if steps_t else float("nan"),
        "step_ms_all": steps_t,
        "pipeline_window_ms": statistics.median(windows) if windows else float("nan"),
        "bubble_per_stage": per_stage,
        "bubble": statistics.mean(per_stage) if per_stage else float("nan"),
        "bubble_theory": (P - 1) / (M + P - 1),
        "bubble_replayed": statistics.mean(replayed) if replayed else float("nan"),
        "bubble_buffered": statistics.mean(buffered) if buffered else float("nan"),
    }


CLOCK_WORDS = {trace_events.GPU: "device-time (GPU) events",
               trace_events.HOST: "host-side events"}


def launch_order(events: List[dict]) -> Dict[int, float]:
    """For each device-time event (by id()), the host start of the same
    instruction's launch: the n-th device span of an instruction on a rank's
    stream is its n-th host span there (a stream runs its work in order)."""
    spans: Dict[Tuple[str, int, int, int], List[dict]] = {}
    for e in events:
        key = (trace_events.clock(e), e["pid"], trace_events.stream(e),
               e["args"]["instruction"])
        spans.setdefault(key, []).append(e)
    order: Dict[int, float] = {}
    for (clock, pid, st, i), device in spans.items():
        if clock == trace_events.HOST:
            continue
        host = sorted(spans.get((trace_events.HOST, pid, st, i), []), key=lambda e: e["ts"])
        for d, h in zip(sorted(device, key=lambda e: e["ts"]), host):
            order[id(d)] = h["ts"]
    return order


def replay_bubble(stages: List[List[dict]], buffered: bool = False) -> Optional[float]:
    """Replays one step's per-stage instruction sequences (as executed, with
    their measured durations) with free transfers: a send_tensor only makes
    its two sides meet. Returns the mean over stages of 1 - busy / makespan:
    the bubble of the schedule itself, without the transport latency that
    dominates small layers on CPU. send_tensor is a rendezvous in the runtime
    (both sides block until they meet); ``buffered`` replays it as an
    asynchronous send instead (the sender goes on, the receiver waits for the
    data), the model behind (p-1)/(m+p-1)."""
    if buffered:
        return _replay_buffered(stages)
    P = len(stages)
    if P < 2 or any(not s for s in stages):
        return None
    t = [0.0] * P
    pos = [0] * P
    busy = [0.0] * P
    waiting: Dict[int, Tuple[int, float]] = {}   # send instruction -> (stage, time)
    progress = True
    while progress:
        progress = False
        for st in range(P):
            while pos[st] < len(stages[st]):
                e = stages[st][pos[st]]
                if e["name"] != "send_tensor":
                    t[st] += e["dur"]
                    busy[st] += e["dur"]
                    pos[st] += 1
                    progress = True
                    continue
                i = e["args"]["instruction"]
                other = waiting.get(i)
                if other is None:
                    if waiting.get(-1 - st) == i:
                        break                        # already waiting for the peer
                    waiting[i] = (st, t[st])
                    waiting[-1 - st] = i
                    break
                if other[0] == st:
                    break
                meet = max(t[st], other[1])
                t[st] = meet
                t[other[0]] = meet
                pos[st] += 1
                pos[other[0]] += 1
                del waiting[i]
                waiting.pop(-1 - other[0], None)
                progress = True
                break
    if any(pos[st] < len(stages[st]) for st in range(P)):
        return None                                  # unmatched transfers
    span = max(t)
    return statistics.mean(1 - b / span for b in busy) if span > 0 else None


def _replay_buffered(stages: List[List[dict]]) -> Optional[float]:
    P = len(stages)
    t = [0.0] * P
    pos = [0] * P
    busy = [0.0] * P
    sent: Dict[int, float] = {}
    progress = True
    while progress:
        progress = False
        for st in range(P):
            while pos[st] < len(stages[st]):
                e = stages[st][pos[st]]
                if e["name"] != "send_tensor":
                    t[st] += e["dur"]
                    busy[st] += e["dur"]
                elif SEND_SOURCE.get(e["args"]["instruction"]) == st:
                    sent[e["args"]["instruction"]] = t[st]
                elif e["args"]["instruction"] in sent:
                    t[st] = max(t[st], sent[e["args"]["instruction"]])
                else:
                    break
                pos[st] += 1
                progress = True
    if any(pos[st] < len(stages[st]) for st in range(P)):
        return None
    span = max(t)
    return statistics.mean(1 - b / span for b in busy) if span > 0 else None


# -- eager ------------------------------------------------------------------------------

def run_eager(cfg: model.Config, backend: str = "c") -> Tuple[List[float], float]:
    """The same program, eagerly: per-step time after the first step."""
    from monarch.actor import this_host

    mesh = this_host().spawn_procs(cfg.shape(), backend=backend)
    try:
        marks: List[float] = []

        def on_step(step: int, fut: Any) -> None:
            if step == 0:
                fut.get()                # the first step (and set-up) is done
                marks.append(time.monotonic())

        futs = model.train(cfg, mesh, on_step=on_step)
        losses = [f.get().item() for f in futs]
        t1 = time.monotonic()
        per_step = (t1 - marks[0]) / max(cfg.steps - 1, 1) * 1e3
    finally:
        mesh.stop()
    return losses, per_step


def max_relative_difference(losses: List[float], ref: List[float]) -> float:
    return max(abs(x - y) / max(abs(y), 1e-6) for x, y in zip(losses, ref))


def check_reference(cfg: model.Config, losses: List[float]) -> bool:
    """Prints how far ``losses`` are from the single-process run's; True when
    every step is within relative 1e-4 (the tests' tolerance)."""
    ref = model.reference(cfg)
    err = max_relative_difference(losses, ref)
    ok = len(ref) == len(losses) and err < 1e-4
    print(f"single-process reference: max relative loss difference {err:.2e} over "
          f"{len(losses)} steps ({'OK' if ok else 'MISMATCH'}, tolerance 1e-4)")
    return ok


def run_compiled_step(cfg: model.Config, reference: bool) -> int:
    """``--compiled-step``: the job eagerly, its step compiled once."""
    from monarch.actor import this_host

    # A remote data loader runs Python on the workers.
    kind = {"tensor_worker": "python"} if cfg.loader == "remote" else {}
    mesh = this_host().spawn_procs(cfg.shape(), **kind)
    session = mesh._session
    try:
        marks: Dict[str, Any] = {}

        def on_step(step: int, fut: Any) -> None:
            if step == 2:  # two traces and the first replay are issued
                fut.get()
                marks["t"], marks["issued"] = time.monotonic(), session.issued

        t0 = time.monotonic()
        futs = model.train(cfg, mesh, on_step=on_step, compiled=True)
        issued_all = session.issued
        losses = [f.get().item() for f in futs]
        t1 = time.monotonic()
    finally:
        mesh.stop()
    every = max(1, cfg.steps // 20)
    for s, l in enumerate(losses):
        if s % every == 0 or s == len(losses) - 1:
            print(f"step {s:5d}  loss {l:.6f}")
    if "t" in marks and cfg.steps > 3:
        rest = cfg.steps - 3
        per_step = (t1 - marks["t"]) / rest * 1e3
        per_call = (issued_all - marks["issued"]) / rest
        print(f"{cfg.steps} steps in {t1 - t0:.2f} s: {per_step:.2f} ms/step after the first "
              f"3 (two traces, one replay); {per_call:.2f} instructions issued per step")
    if reference:
        return 0 if check_reference(cfg, losses) else 1
    return 0


# -- main -------------------------------------------------------------------------------

def _ints(text: Optional[str]) -> Optional[List[int]]:
    return [int(v) for v in text.split(",")] if text else None


def config_from_args(a: argparse.Namespace) -> model.Config:
    return model.Config(pp=a.pp, dp=a.dp, microbatches=a.microbatches, batch=a.batch,
                        hidden=a.hidden, layers_per_stage=a.layers, model=a.model,
                        optimizer=a.optimizer, lr=a.lr if a.lr is not None else
                        (0.005 if a.optimizer == "adam" else 0.05),
                        steps=a.steps, schedule=a.schedule, widths=_ints(a.widths),
                        partition=None if a.partition == "auto" else _ints(a.partition),
                        device=a.device, loader=getattr(a, "loader", "ops"))


def partition_job(cfg: model.Config, opt: str, profile: Optional[str] = None) -> model.Config:
    """Fixes ``cfg.partition``: the user's, or the cost model's for blocks of
    different widths (partition.py); prints the predicted stage times."""
    if cfg.partition is not None or not cfg.widths:
        return cfg
    import partition

    sizes, costs = partition.choose_partition(cfg, opt, profile=profile)
    stage = partition.stage_costs(costs, sizes)
    print(f"partition by the cost model: blocks per stage {sizes} (block costs "
          + ", ".join(f"{c * 1e6:.1f}" for c in costs) + " us; predicted stage times "
          + ", ".join(f"{c * 1e6:.1f}" for c in stage) + " us per microbatch)")
    return dataclasses.replace(cfg, partition=sizes)


def run_looped(cfg: model.Config, plan: str, runner: str, reference: bool) -> int:
    """``--loop``: the plan run by monarch-run, every step's loss printed (a
    fetch inside the loop replies once per trip), checked against the
    single-process reference."""
    losses, _ids, wall, cmd = run_job(plan, None, runner, timeout=3600)
    print(f"ran: {' '.join(cmd)}  ({wall:.2f} s with worker start-up, "
          f"{wall / max(len(losses), 1) * 1e3:.2f} ms/step)")
    shown = sorted(set(range(min(3, len(losses)))) | set(range(max(len(losses) - 3, 0),
                                                              len(losses))))
    for s in shown:
        print(f"step {s:5d}  loss {losses[s]:.6f}")
    if len(losses) != cfg.steps:
        print(f"MISMATCH: {len(losses)} losses for {cfg.steps} steps")
        return 1
    if not reference:
        return 0
    return 0 if check_reference(cfg, losses) else 1


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--microbatches", "-m", type=int, default=4)
    p.add_argument("--batch", type=int, default=16, help="rows per dp replica per step")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--layers", type=int, default=2, help="blocks per stage")
    p.add_argument("--widths", default=None,
                   help="MLP: inner width of each block, comma-separated (blocks of "
                        "different cost)")
    p.add_argument("--partition", default="auto",
                   help="blocks per stage, comma-separated, or 'auto' (even, or by the "
                        "cost model when --widths differ)")
    p.add_argument("--cost-profile", default=None,
                   help="JSON cost profile for the partitioner (default: the device's)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (parameters and data)")
    p.add_argument("--no-run", action="store_true",
                   help="trace and compile only (e.g. a plan for another machine)")
    p.add_argument("--model", choices=["mlp", "transformer"], default="mlp")
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--schedule", choices=["gpipe", "1f1b"], default="gpipe",
                   help="the order the Python program issues microbatches in")
    p.add_argument("--pass-schedule", choices=["none", "gpipe", "1f1b"], default="none",
                   help="reorder with monarch-opt --monarch-pipeline-schedule")
    p.add_argument("--pipeline-options", default="", help="monarch-default-pipeline options")
    p.add_argument("--out", default="/tmp/monarch-pipeline", help="where job.mlir/.plan/trace go")
    p.add_argument("--eager", action="store_true", help="also run eagerly and compare step time")
    p.add_argument("--reference", action="store_true",
                   help="also compare the losses with a single-process torch run")
    p.add_argument("--loader", choices=["ops", "remote"], default="ops",
                   help="each step's batch from tensor ops on the mesh, or from a monarch.remote "
                        "data loader run by Python tensor workers (--compiled-step only)")
    p.add_argument("--loop", action="store_true",
                   help="trace the steps as one monarch.range loop (a plan whose size does not "
                        "depend on --steps); prints the losses, no step-time analysis")
    p.add_argument("--compiled-step", action="store_true",
                   help="run eagerly with the step compiled once (monarch.compile)")
    a = p.parse_args(argv)
    cfg = config_from_args(a)
    if a.compiled_step:
        return run_compiled_step(cfg, a.reference)
    if cfg.loader == "remote":
        p.error("--loader remote needs Python tensor workers, which monarch-run does not start: "
                "use it with --compiled-step")
    os.makedirs(a.out, exist_ok=True)
    mlir = os.path.join(a.out, "job.mlir")
    recorded = os.path.join(a.out, "job.trace")
    plan = os.path.join(a.out, "job.plan")
    trace = os.path.join(a.out, "job.trace.json")

    opt = find_tool("monarch-opt", "MONARCH_OPT")
    cfg = partition_job(cfg, opt, a.cost_profile)
    t0 = time.monotonic()
    tr = record_job(cfg, a.loop)
    with open(recorded, "wb") as f:
        f.write(tr.traced)
    t1 = time.monotonic()
    compile_job(recorded, plan, opt, a.pass_schedule, a.pipeline_options)
    t2 = time.monotonic()
    text = tr.to_mlir()  # the IR, for reading (monarch-opt compiled job.trace itself)
    with open(mlir, "w") as f:
        f.write(text)
    n_ops = sum(1 for line in text.splitlines() if line.lstrip().startswith("%") or
                line.lstrip().startswith("monarch."))
    sizes = [len(r) for r in cfg.stage_layers()]
    blocks = (f"{sizes[0]} blocks/stage" if len(set(sizes)) == 1 and not cfg.widths
              else "blocks per stage " + "/".join(map(str, sizes)))
    where = "" if cfg.device == "cpu" else f", {cfg.device}"
    print(f"model {cfg.model} ({blocks}, hidden {cfg.hidden}{where}), "
          f"mesh pp={cfg.pp} x dp={cfg.dp}, {cfg.microbatches} microbatches of "
          f"{cfg.batch // cfg.microbatches} rows, {cfg.optimizer}, {cfg.steps} steps, "
          f"schedule {cfg.schedule}" + (f" + pass {a.pass_schedule}" if a.pass_schedule != "none"
                                         else ""))
    print(f"traced {n_ops} ops in {t1 - t0:.2f} s -> {recorded} (IR: {mlir}); compiled in "
          f"{t2 - t1:.2f} s -> {plan}")
    if a.no_run:
        return 0
    runner = find_tool("monarch-run", "MONARCH_RUN")
    if a.loop:
        print(f"plan: {os.path.getsize(plan)} bytes, trace: {len(tr.traced)} bytes")
        return run_looped(cfg, plan, runner, a.reference)
    losses, ids, wall, cmd = run_job(plan, trace, runner)
    print(f"ran: {' '.join(cmd)}  ({wall:.2f} s with worker start-up)")
    for s, l in enumerate(losses):
        print(f"step {s:3d}  loss {l:.6f}")
    st = analyze(trace, plan, ids, cfg)
    print(f"step time {st['step_ms']:.2f} ms (median over steps 1..{cfg.steps - 1}, "
          f"from the trace's {CLOCK_WORDS[st['clock']]})")
    print(f"pipeline bubble {st['bubble']:.3f} measured (per stage "
          + ", ".join(f"{b:.3f}" for b in st["bubble_per_stage"])
          + f"; fwd/bwd window {st['pipeline_window_ms']:.2f} ms) vs theory "
          f"(p-1)/(m+p-1) = {st['bubble_theory']:.3f}")
    print(f"  replayed from the trace with its op times and free transfers: bubble "
          f"{st['bubble_replayed']:.3f} with rendezvous sends (as the runtime does them), "
          f"{st['bubble_buffered']:.3f} with buffered sends")
    rc = 0
    if a.reference:
        rc = 0 if check_reference(cfg, losses) else 1
    if a.eager:
        el, eager_ms = run_eager(cfg)
        err = max_relative_difference(losses, el)
        print(f"eager: {eager_ms:.2f} ms/step; compiled {st['step_ms']:.2f} ms/step: "
              f"{eager_ms / st['step_ms']:.1f}x faster (losses agree to {err:.1e})")
    print(f"trace: {trace} (open in ui.perfetto.dev)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
