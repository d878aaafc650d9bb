"""Python actors on the C++ runtime vs the C++ actors and torch.distributed.rpc,
measured in one run (docs/benchmarks.md, "Python actors").

    PYTHONPATH=build/python /usr/bin/python3 bench/actors/python_actors.py [build-dir] [reps]

Figures, each the median of ``reps`` repetitions (the repetitions of the
three systems interleave):

* round trip: ``call_one`` of a 32-byte string echo to one Python actor in
  another process (2,000 round trips per repetition);
* throughput: 20,000 ``broadcast``s of one int to one Python actor, ended by a
  ``call_one`` that checks the count;

next to, in the same run, the C++ actor figures of the same shape
(``monarch-runtime-bench --only unix`` and ``--only throughput``: callOne of a
32-byte string echo, broadcast of one int64) and torch.distributed.rpc's
ping-pong of a 32-byte string between two Python processes
(bench/torch_rpc_pingpong.py).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Tuple

from monarch.actor import Actor, endpoint, this_host

ROUND_TRIPS = 2000
MESSAGES = 20000


class Echo(Actor):
    def __init__(self) -> None:
        self.count = 0

    @endpoint
    def echo(self, s: str) -> str:
        return s

    @endpoint
    def bump(self, x: int) -> None:
        self.count += x

    @endpoint
    def take(self) -> int:
        n, self.count = self.count, 0
        return n


def python_figures(reps: int) -> Tuple[float, float]:
    """(round trip in µs, messages/s), medians of ``reps``."""
    procs = this_host().spawn_procs({"gpu": 1}, backend="sim")
    try:
        actor = procs.spawn("echo", Echo)
        payload = "p" * 32
        for _ in range(200):  # warm up: links, imports
            actor.echo.call_one(payload).get()
        trips: List[float] = []
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(ROUND_TRIPS):
                actor.echo.call_one(payload).get()
            trips.append((time.perf_counter() - start) / ROUND_TRIPS * 1e6)
        rates: List[float] = []
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(MESSAGES):
                actor.bump.broadcast(1)
            got = actor.take.call_one().get(timeout=300)
            rates.append(MESSAGES / (time.perf_counter() - start))
            if got != MESSAGES:
                raise RuntimeError(f"the actor counted {got} of {MESSAGES} messages")
        return statistics.median(trips), statistics.median(rates)
    finally:
        procs.stop()


_ROW = re.compile(r"^\| ([^|]+) \| ([\d.,]+) (\S+) \|")


def cpp_figures(build: str, reps: int) -> Dict[str, Tuple[float, str]]:
    """The C++ runtime's rows: {figure: (value, unit)}."""
    out: Dict[str, Tuple[float, str]] = {}
    for only in ("unix", "throughput"):
        text = subprocess.run(
            [os.path.join(build, "bin", "monarch-runtime-bench"), "--reps", str(reps),
             "--only", only],
            check=True, capture_output=True, text=True, timeout=600).stdout
        for line in text.splitlines():
            m = _ROW.match(line)
            if m and m.group(1) != "figure":
                out[m.group(1).strip()] = (float(m.group(2).replace(",", "")), m.group(3))
    return out


def torch_rpc_figure(reps: int) -> float:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = subprocess.run(
        [sys.executable, os.path.join(here, "torch_rpc_pingpong.py"), str(ROUND_TRIPS),
         str(reps)], check=True, capture_output=True, text=True, timeout=600).stdout
    m = re.search(r"([\d.]+) us", text)
    if not m:
        raise RuntimeError(f"unexpected output of torch_rpc_pingpong.py: {text!r}")
    return float(m.group(1))


def main() -> None:
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    load = os.getloadavg()[0]
    # Repetitions interleave the three systems, so that a change of machine
    # load hits all of them alike; each figure is the median of its reps.
    runs: Dict[str, List[float]] = {"py_rtt": [], "py_rate": [], "cpp_rtt": [],
                                    "cpp_rate": [], "rpc": []}
    for _ in range(reps):
        py_rtt, py_rate = python_figures(1)
        cpp = cpp_figures(build, 1)
        runs["py_rtt"].append(py_rtt)
        runs["py_rate"].append(py_rate)
        runs["cpp_rtt"].append(next(v for k, (v, _) in cpp.items()
                                    if k.startswith("actor ping-pong, Unix")))
        runs["cpp_rate"].append(next(v for k, (v, _) in cpp.items()
                                     if k.startswith("small-message throughput")))
        runs["rpc"].append(torch_rpc_figure(1))
    py_rtt, py_rate, cpp_rtt, cpp_rate, rpc = (
        statistics.median(runs[k]) for k in ("py_rtt", "py_rate", "cpp_rtt", "cpp_rate", "rpc"))
    print(f"load average at start {load:.1f}, at end {os.getloadavg()[0]:.1f}; median of {reps}")
    print()
    print("| figure | Python actors | baseline | baseline value | ratio |")
    print("|---|---|---|---|---|")
    print(f"| round trip, call_one of a 32-byte string echo, 2 processes | {py_rtt:.1f} µs | "
          f"C++ actor callOne, same run | {cpp_rtt:.1f} µs | {py_rtt / cpp_rtt:.2f}× |")
    print(f"| round trip | {py_rtt:.1f} µs | torch.distributed.rpc rpc_sync, same run | "
          f"{rpc:.1f} µs | {py_rtt / rpc:.2f}× |")
    print(f"| throughput, broadcast of one int to one actor | {py_rate:,.0f} msg/s | "
          f"C++ actor broadcast, same run | {cpp_rate:,.0f} msg/s | {py_rate / cpp_rate:.2f}× |")


if __name__ == "__main__":
    main()
