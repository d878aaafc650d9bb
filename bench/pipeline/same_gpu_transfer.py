#!/usr/bin/env python3
"""What one ``to_mesh`` between two worker processes costs (docs/benchmarks.md
"Same-GPU transfers"): a chain of round trips of a ``[rows, hidden]`` tensor
between the two stage meshes of ``{"pp": 2}`` -- stage 0 sends, stage 1 adds
one and sends back -- issued eagerly, then fetched once; the time per one-way
transfer is the chain's wall time over its transfers, median of ``--reps``
chains. With ``--device cuda`` and one GPU both processes share it, so the
transfers are the CUDA backend's same-GPU ones: CUDA IPC, or host copies
through Gloo when the workers run with ``MONARCH_CUDA_IPC=off`` (``--ipc
off``). ``--device cpu`` moves the same tensor through Gloo alone: the host
path every transfer also takes for its control step. The chain checks its
result (``2 * transfers`` ... ``+ 1`` per round trip).

    PYTHONPATH=build/python python3 bench/pipeline/same_gpu_transfer.py --device cpu
    PYTHONPATH=build-gpu/python python3 bench/pipeline/same_gpu_transfer.py --device cuda --ipc off
"""

import argparse
import os
import statistics
import sys
import time
from typing import List


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--ipc", default="on", choices=["on", "off"],
                   help="MONARCH_CUDA_IPC for the workers (cuda only)")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--round-trips", type=int, default=200)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args(argv)
    os.environ["MONARCH_CUDA_IPC"] = a.ipc  # the workers inherit it

    import torch
    import monarch
    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"pp": 2})
    try:
        first, second = mesh.slice(pp=0), mesh.slice(pp=1)
        per_transfer: List[float] = []
        for rep in range(a.reps + 1):  # the first chain connects and warms up
            with first.activate():
                x = torch.zeros(a.rows, a.hidden, device=a.device)
            t0 = time.perf_counter()
            for _ in range(a.round_trips):
                y = x.to_mesh(second)
                with second.activate():
                    y = y + 1
                x = y.to_mesh(first)
            with first.activate():
                got = monarch.fetch_shard(x).get()
            t1 = time.perf_counter()
            expected = float(a.round_trips)
            if not torch.equal(got, torch.full((a.rows, a.hidden), expected)):
                print(f"wrong result: {got.flatten()[:4].tolist()} where {expected} was due")
                return 1
            if rep > 0:
                per_transfer.append((t1 - t0) / (2 * a.round_trips) * 1e6)
    finally:
        mesh.stop()
    path = ("Gloo (CPU tensors)" if a.device == "cpu" else
            "CUDA IPC" if a.ipc == "on" else "host copies through Gloo")
    print(f"to_mesh of [{a.rows}, {a.hidden}] float32 between two processes, {path}: "
          f"{statistics.median(per_transfer):.1f} us per transfer (median of {a.reps} chains "
          f"of {2 * a.round_trips}; all: "
          + ", ".join(f"{v:.1f}" for v in per_transfer) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
