#!/usr/bin/env python3
"""The floor under a same-GPU ``to_mesh`` (docs/benchmarks.md "Same-GPU
transfers"): the chain of bench/pipeline/same_gpu_transfer.py written in plain
torch, with no monarch at all.

Stage 0 copies ``x`` into a shared buffer and records an event; stage 1 waits
for that event on its stream, adds one into a second shared buffer and records
its own event; stage 0 waits for that and copies the result back into ``x``.
Each side tells the other through a spinning shared-memory counter that its
event is recorded, never waiting for the GPU itself, so the whole chain is
issued ahead of the device. The time per one-way transfer is the chain's wall
time (to a final synchronize) over its transfers, median of ``--reps`` chains.

``--mode two-process``: the stages are two processes on one GPU, sharing the
buffers and events through CUDA IPC (torch.multiprocessing) -- what any
multi-process program on one GPU can reach without MPS. ``--mode
one-process``: the stages are two streams of one process (one CUDA context),
the same kernels and event waits. ``--wait host`` (two processes only): each
side polls the other's event from its host until it completed before issuing
its own kernel, so neither context ever holds work blocked on the other. The
chain checks its result.

    python3 bench/pipeline/raw_cuda_ipc.py --mode two-process --round-trips 200 --reps 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import List

import torch
import torch.multiprocessing as mp

_SPIN_LIMIT_S = 60.0  # a stage that never answers fails the run instead of hanging it


def wait_for_flag(flags: torch.Tensor, index: int, value: int) -> None:
    """Spins until the other stage has set ``flags[index]`` to ``value`` or more
    (bench/pipeline/raw_pipeline.py signals the same way)."""
    start = time.monotonic()
    spins = 0
    while int(flags[index]) < value:
        spins += 1
        if spins % 10000 == 0 and time.monotonic() - start > _SPIN_LIMIT_S:
            raise TimeoutError(f"the other stage did not reach {value} within {_SPIN_LIMIT_S} s")


def _wait_event(stream: torch.cuda.Stream, event: torch.cuda.Event, host: bool) -> None:
    """The stream waits for ``event``: on the device, or on the host first."""
    if host:
        start = time.monotonic()
        while not event.query():
            if time.monotonic() - start > _SPIN_LIMIT_S:
                raise TimeoutError(f"an event did not complete within {_SPIN_LIMIT_S} s")
    else:
        stream.wait_event(event)


def _stage_one(sent: torch.Tensor, back: torch.Tensor, flags: torch.Tensor,
               sent_event_handle: bytes, handles: "mp.Queue", total: int,
               host_wait: bool) -> None:
    """Stage 1 in its own process: ``back = sent + 1`` after stage 0's event."""
    torch.cuda.set_device(sent.device)
    stream = torch.cuda.Stream()
    sent_ready = torch.cuda.Event.from_ipc_handle(sent.device, sent_event_handle)
    back_ready = torch.cuda.Event(interprocess=True)
    handles.put(back_ready.ipc_handle())
    with torch.cuda.stream(stream):
        for i in range(1, total + 1):
            wait_for_flag(flags, 0, i)
            _wait_event(stream, sent_ready, host_wait)
            torch.add(sent, 1, out=back)
            back_ready.record(stream)
            flags[1] = i
    stream.synchronize()


def _chain(x: torch.Tensor, sent: torch.Tensor, back: torch.Tensor, flags: torch.Tensor,
           sent_ready: torch.cuda.Event, back_ready: torch.cuda.Event, first: int,
           round_trips: int, stream: torch.cuda.Stream, host_wait: bool) -> float:
    """Stage 0's side of ``round_trips`` round trips numbered from ``first``."""
    t0 = time.perf_counter()
    with torch.cuda.stream(stream):
        for i in range(first, first + round_trips):
            sent.copy_(x)
            sent_ready.record(stream)
            flags[0] = i
            wait_for_flag(flags, 1, i)
            _wait_event(stream, back_ready, host_wait)
            x.copy_(back)
    stream.synchronize()
    return time.perf_counter() - t0


def _one_process_chain(x: torch.Tensor, sent: torch.Tensor, back: torch.Tensor,
                       round_trips: int, streams: List[torch.cuda.Stream]) -> float:
    """Both stages as two streams of this process: the same kernels and waits."""
    s0, s1 = streams
    sent_ready, back_ready = torch.cuda.Event(), torch.cuda.Event()
    t0 = time.perf_counter()
    for _ in range(round_trips):
        with torch.cuda.stream(s0):
            sent.copy_(x)
            sent_ready.record(s0)
        with torch.cuda.stream(s1):
            s1.wait_event(sent_ready)
            torch.add(sent, 1, out=back)
            back_ready.record(s1)
        with torch.cuda.stream(s0):
            s0.wait_event(back_ready)
            x.copy_(back)
    s0.synchronize()
    return time.perf_counter() - t0


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", default="two-process", choices=["two-process", "one-process"])
    p.add_argument("--wait", default="device", choices=["device", "host"],
                   help="two processes: wait for the other side's event on the stream or the host")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--round-trips", type=int, default=200)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args(argv)
    if a.wait == "host" and a.mode != "two-process":
        p.error("--wait host is for --mode two-process (one process waits on its streams)")
    host_wait = a.wait == "host"
    if not torch.cuda.is_available():
        print("raw_cuda_ipc.py needs a CUDA device", file=sys.stderr)
        return 2

    shape = (a.rows, a.hidden)
    x = torch.zeros(shape, device="cuda")
    sent = torch.zeros(shape, device="cuda")
    back = torch.zeros(shape, device="cuda")
    chains = a.reps + 1  # the first chain warms up
    seconds: List[float] = []
    if a.mode == "two-process":
        ctx = mp.get_context("spawn")
        flags = torch.zeros(2, dtype=torch.int64).share_memory_()
        sent_ready = torch.cuda.Event(interprocess=True)
        handles = ctx.Queue()
        child = ctx.Process(target=_stage_one, daemon=True,
                            args=(sent, back, flags, sent_ready.ipc_handle(), handles,
                                  chains * a.round_trips, host_wait))
        child.start()
        try:
            back_ready = torch.cuda.Event.from_ipc_handle(x.device, handles.get(timeout=120))
            stream = torch.cuda.Stream()
            for rep in range(chains):
                seconds.append(_chain(x, sent, back, flags, sent_ready, back_ready,
                                      1 + rep * a.round_trips, a.round_trips, stream,
                                      host_wait))
            child.join(timeout=60)
            if child.exitcode != 0:
                print(f"stage 1 exited with {child.exitcode}", file=sys.stderr)
                return 1
        finally:
            if child.is_alive():
                child.kill()
                child.join()
    else:
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        for _ in range(chains):
            seconds.append(_one_process_chain(x, sent, back, a.round_trips, streams))

    expected = float(chains * a.round_trips)
    if not torch.equal(x.cpu(), torch.full(shape, expected)):
        print(f"wrong result: {x.flatten()[:4].tolist()} where {expected} was due")
        return 1
    per_transfer = [s / (2 * a.round_trips) * 1e6 for s in seconds[1:]]
    where = (f"two processes on one GPU, CUDA IPC, waits on the {a.wait}"
             if a.mode == "two-process" else "two streams of one process")
    print(f"plain torch chain of [{a.rows}, {a.hidden}] float32, {where}: "
          f"{statistics.median(per_transfer):.1f} us per transfer (median of {a.reps} chains "
          f"of {2 * a.round_trips}; all: " + ", ".join(f"{v:.1f}" for v in per_transfer) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
