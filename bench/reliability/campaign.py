#!/usr/bin/env python3
"""The hardening issue's input kinds at ten times its counts, on the built tree
(docs/benchmarks.md, "Reliability: the other input kinds").

    campaign.py BUILD_DIR mlir  [--modules 230000] [--batch 1000] [--seed 1]
    campaign.py BUILD_DIR plans [--runs 11000] [--jobs 2] [--seed 1]
    campaign.py BUILD_DIR messages [--count 10000000]
    campaign.py BUILD_DIR kills [--rounds 10]

* ``mlir``: mutated ``.mlir`` modules through ``monarch-opt`` and the
  default pipeline. Seeds are the chunks of every ``.mlir`` file under
  ``test/``; each module is a seed with one to four mutations (lines deleted,
  duplicated or swapped, integers replaced by extremes, SSA names and types
  exchanged, bytes flipped, a truncation). Modules go ``--batch`` to a file,
  split with ``// -----`` (``--split-input-file``: each is parsed, verified
  and, when it verifies, run through the pipeline on its own).
* ``plans``: mutated plans through ``monarch-run``: seed plans emitted from
  the integration programs (``--emit-plan``), mutated as bytes (flips,
  extreme varints, truncations, duplicated or dropped ranges), each run
  with a 60 s timeout.
* ``messages``: ``runtime.Ordering.MillionMessages...`` with ten million.
* ``kills``: the chaos test (kills, stops and garbage against a training
  loop) ``--rounds`` times.

A failure is a crash or abort (a signal, an exit status other than the tool's
own -- 0/1 for monarch-opt, 0-3 for monarch-run -- a stack dump,
an LLVM fatal error, a sanitizer report), a hang (the timeout) or, for
``monarch-run``, a process or directory left behind. Each failing input is
kept under ``--keep`` (default ``campaign-failures/``); the summary line
counts inputs and failures, and the exit code is 1 if any failed.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPLIT = "// -----"
CRASH = re.compile(r"Stack dump|LLVM ERROR|Assertion .* failed|AddressSanitizer|"
                   r"UndefinedBehaviorSanitizer|terminate called|Segmentation fault")
EXTREMES = ["0", "-1", "1", "2147483647", "2147483648", "4294967296", "1099511627776",
            "9223372036854775807", "18446744073709551616", "100000", "1000000", "-9223372036854775808"]
# What monarch-opt says when it refuses text that would crash MLIR's parser
# (compiler/include/monarch/Compiler/Import/ParserGuards.h), and that text.
GUARD = "MLIR's parser would crash"
GUARDED = re.compile(r"(?<![\w$.])array\s*<\s*index(?![\w$.])")
TYPES = ["f32", "f64", "i64", "i1", "bf16", "f16", "index", "i32"]


def crashed(rc: int, err: str, statuses: Tuple[int, ...] = (0, 1)) -> bool:
    """Whether a run crashed: an exit status other than the tool's own
    (monarch-opt: 0, 1; monarch-run: 0, 1, 2 for input it refuses, 3 for a
    run that timed out) or a
    crash report on stderr."""
    return rc not in statuses or bool(CRASH.search(err))


# -- .mlir modules ---------------------------------------------------------------------
def mlir_seeds() -> List[str]:
    chunks = []
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.mlir"), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for chunk in text.split(SPLIT):
            # RUN/CHECK lines are comments to the parser; they only make the
            # modules longer.
            body = "\n".join(l for l in chunk.splitlines()
                             if not l.lstrip().startswith("// "))
            if "func.func" in body or "monarch." in body:
                chunks.append(body)
    return chunks


def mutate_text(rng: random.Random, text: str) -> str:
    lines = text.splitlines() or [""]
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(8)
        i = rng.randrange(len(lines))
        if kind == 0 and len(lines) > 1:
            del lines[i]
        elif kind == 1:
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
        elif kind == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == 3:
            nums = list(re.finditer(r"\b\d+\b", lines[i]))
            if nums:
                m = rng.choice(nums)
                lines[i] = lines[i][:m.start()] + rng.choice(EXTREMES) + lines[i][m.end():]
        elif kind == 4:
            names = re.findall(r"%[\w#]+", text)
            if names:
                lines[i] = re.sub(r"%[\w#]+", lambda _m: rng.choice(names), lines[i], count=1)
        elif kind == 5:
            lines[i] = re.sub(r"\b(f32|f64|i64|i1|bf16|f16|i32|index)\b",
                              lambda _m: rng.choice(TYPES), lines[i], count=1)
        elif kind == 6 and lines[i]:
            b = bytearray(lines[i].encode())
            b[rng.randrange(len(b))] = rng.choice(b"{}()<>[]%@!:,=x?#\"\\0-9 \x00\xff")
            lines[i] = b.decode("utf-8", errors="replace")
        else:
            joined = "\n".join(lines)
            lines = joined[:rng.randrange(len(joined) + 1)].splitlines() or [""]
    return "\n".join(lines).replace(SPLIT, "//")


def run_mlir(build: str, args: argparse.Namespace) -> Tuple[int, int]:
    opt = os.path.join(build, "bin", "monarch-opt")
    seeds = mlir_seeds()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="monarch-campaign-")
    done = failures = guarded = 0
    try:
        while done < args.modules:
            n = min(args.batch, args.modules - done)
            modules = [mutate_text(rng, rng.choice(seeds)) for _ in range(n)]
            path = os.path.join(work, "batch.mlir")
            with open(path, "w") as f:
                f.write(f"\n{SPLIT}\n".join(modules))
            rc, err = run([opt, "--split-input-file", "--monarch-default-pipeline", path,
                           "-o", os.devnull], 300)
            while rc == 1 and GUARD in err:
                # monarch-opt refused the whole file for a module that would
                # crash MLIR's parser (ParserGuards.h): an error, as it
                # should be; the other modules run without those.
                kept = [m for m in modules if not GUARDED.search(m)]
                guarded += len(modules) - len(kept)
                if len(kept) == len(modules):
                    break
                modules = kept
                with open(path, "w") as f:
                    f.write(f"\n{SPLIT}\n".join(modules))
                rc, err = run([opt, "--split-input-file", "--monarch-default-pipeline", path,
                               "-o", os.devnull], 300)
            if rc is None or crashed(rc, err):
                failures += bisect_mlir(opt, modules, args.keep, work)
            done += n
            print(f"mlir: {done} modules, {failures} failures, {guarded} refused by "
                  "monarch-opt's parser guard", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return done, failures


def bisect_mlir(opt: str, modules: List[str], keep: str, work: str) -> int:
    """Runs the modules of a failed batch one by one; keeps those that fail."""
    bad = 0
    for k, module in enumerate(modules):
        path = os.path.join(work, "one.mlir")
        with open(path, "w") as f:
            f.write(module)
        rc, err = run([opt, "--monarch-default-pipeline", path, "-o", os.devnull], 60)
        if rc is None or crashed(rc, err):
            bad += 1
            os.makedirs(keep, exist_ok=True)
            out = os.path.join(keep, f"mlir-{int(time.time())}-{k}.mlir")
            shutil.copy(path, out)
            print(f"mlir FAILURE ({'hang' if rc is None else rc}): {out}\n{err[-2000:]}",
                  flush=True)
    return bad


# -- plans -------------------------------------------------------------------------------
def plan_seeds(build: str, work: str) -> List[bytes]:
    run_bin = os.path.join(build, "bin", "monarch-run")
    seeds = []
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "Integration", "*.mlir"))):
        out = os.path.join(work, os.path.basename(path) + ".plan")
        rc, _ = run([run_bin, path, "--emit-plan", out,
                     "--monarch-opt", os.path.join(build, "bin", "monarch-opt")], 120)
        if os.path.exists(out) and os.path.getsize(out) > 0:
            with open(out, "rb") as f:
                seeds.append(f.read())
    if not seeds:
        raise SystemExit("no seed plans: monarch-run --emit-plan wrote none")
    return seeds


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        if not b:
            b = bytearray(data[:1])
        kind = rng.randrange(6)
        i = rng.randrange(len(b))
        if kind == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b[i] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
        elif kind == 2:  # an extreme varint where a byte was
            b[i:i + 1] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff" * 9 + b"\x01",
                                     b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"])
        elif kind == 3:
            b = b[:i]
        elif kind == 4:
            j = min(len(b), i + rng.randint(1, 64))
            b[i:i] = b[i:j]
        else:
            del b[i:i + rng.randint(1, 16)]
    return bytes(b)


def leftovers(before: set) -> List[str]:
    tmp = os.environ.get("TMPDIR", "/tmp")
    now = {p for p in os.listdir(tmp) if p.startswith("monarch")}
    return sorted(now - before)


def run_plans(build: str, args: argparse.Namespace) -> Tuple[int, int]:
    run_bin = os.path.join(build, "bin", "monarch-run-nocompiler")
    if not os.path.exists(run_bin):
        run_bin = os.path.join(build, "bin", "monarch-run")
    work = tempfile.mkdtemp(prefix="monarch-campaign-")
    rng = random.Random(args.seed)
    failures = done = 0
    try:
        seeds = plan_seeds(build, work)
        print(f"plans: {len(seeds)} seed plans", flush=True)
        tmp = os.environ.get("TMPDIR", "/tmp")
        before = {p for p in os.listdir(tmp) if p.startswith("monarch")} - {os.path.basename(work)}
        running: List[Tuple[subprocess.Popen, str, float]] = []

        def reap(block: bool) -> None:
            nonlocal failures
            while running and (block or any(p.poll() is not None for p, _, _ in running)):
                for entry in list(running):
                    proc, path, started = entry
                    rc = proc.poll()
                    hung = rc is None and time.monotonic() - started > 60
                    if rc is None and not hung:
                        continue
                    if hung:
                        os.killpg(proc.pid, 9)
                        proc.wait()
                    # stderr went to a file: a pipe nobody reads while the
                    # run lasts would fill and stop it, which looks like a hang.
                    with open(path + ".err", "rb") as f:
                        f.seek(max(0, os.path.getsize(path + ".err") - 4000))
                        err = f.read().decode(errors="replace")
                    os.unlink(path + ".err")
                    running.remove(entry)
                    if hung or crashed(proc.returncode, err, (0, 1, 2, 3)):
                        failures += 1
                        os.makedirs(args.keep, exist_ok=True)
                        shutil.copy(path, os.path.join(args.keep, os.path.basename(path)))
                        print(f"plan FAILURE ({'hang' if hung else proc.returncode}): "
                              f"{path}\n{err[-2000:]}", flush=True)
                    os.unlink(path)
                if block:
                    time.sleep(0.01)
                else:
                    break

        while done < args.runs:
            while len(running) >= args.jobs:
                reap(False)
                time.sleep(0.002)
            path = os.path.join(work, f"m{done}.plan")
            with open(path, "wb") as f:
                f.write(mutate_bytes(rng, rng.choice(seeds)))
            with open(path + ".err", "wb") as err_file:
                proc = subprocess.Popen([run_bin, path, "--timeout", "30"],
                                        stdout=subprocess.DEVNULL, stderr=err_file,
                                        start_new_session=True)
            running.append((proc, path, time.monotonic()))
            done += 1
            if done % 500 == 0:
                print(f"plans: {done} runs, {failures} failures", flush=True)
        reap(True)
        left = leftovers(before | {os.path.basename(work)})
        if left:
            failures += 1
            print(f"plans FAILURE: left behind in {tmp}: {left}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return done, failures


# -- runtime tests at campaign counts ----------------------------------------------------
def run_ctest_binary(build: str, binary: str, filt: str, env: dict,
                     timeout: int) -> Tuple[bool, str]:
    proc = subprocess.run([os.path.join(build, "bin", binary), f"--gtest_filter={filt}"],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def run_messages(build: str, args: argparse.Namespace) -> Tuple[int, int]:
    start = time.monotonic()
    ok, out = run_ctest_binary(build, "RuntimeCastTest",
                               "Ordering.MillionMessagesFromSeveralSendersArriveInOrder",
                               {"MONARCH_ORDERING_MESSAGES": str(args.count)}, 1800)
    line = next((l for l in out.splitlines() if "out of order" in l), out[-500:])
    print(f"messages: {line} ({time.monotonic() - start:.0f} s)", flush=True)
    return args.count, 0 if ok else 1


CHAOS = re.compile(r"chaos: .*?(\d+) kills, (\d+) stalls .*?(\d+) garbage connections")


def run_kills(build: str, args: argparse.Namespace) -> Tuple[int, int]:
    failures = 0
    kills = stalls = garbage = 0
    for r in range(args.rounds):
        ok, out = run_ctest_binary(build, "TensorChaosTest", "*", {}, 600)
        summary = [l for l in out.splitlines() if "chaos" in l.lower()][-3:]
        print(f"kills: round {r + 1}: {'ok' if ok else 'FAILED'} {' | '.join(summary)}",
              flush=True)
        failures += 0 if ok else 1
        m = CHAOS.search(out)
        if m:
            kills, stalls, garbage = (kills + int(m.group(1)), stalls + int(m.group(2)),
                                      garbage + int(m.group(3)))
    print(f"kills: {kills} SIGKILLs and {stalls} SIGSTOP/SIGCONT stalls of tensor workers, "
          f"{garbage} garbage connections, over {args.rounds} runs", flush=True)
    return args.rounds, failures


def run(cmd: List[str], timeout: int) -> Tuple[Optional[int], str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=timeout)
        return proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, err


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build")
    parser.add_argument("kind", choices=["mlir", "plans", "messages", "kills"])
    parser.add_argument("--modules", type=int, default=230000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=11000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--count", type=int, default=10000000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", default="campaign-failures")
    args = parser.parse_args()
    kinds: dict = {"mlir": run_mlir, "plans": run_plans, "messages": run_messages,
                   "kills": run_kills}
    start = time.monotonic()
    count, failures = kinds[args.kind](os.path.abspath(args.build), args)
    print(f"{args.kind}: {count} inputs, {failures} failures, "
          f"{time.monotonic() - start:.0f} s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
