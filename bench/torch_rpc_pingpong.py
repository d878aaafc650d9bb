"""Actor-style ping-pong through torch.distributed.rpc, the peer system for
docs/benchmarks.md: rank 0 calls an echo function on rank 1 with a 32-byte
string (TensorPipe over loopback) and reports the mean round trip.

Run with Debian's interpreter: /usr/bin/python3 bench/torch_rpc_pingpong.py
"""
import os
import socket
import statistics
import sys
import time

import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def echo(s):
    return s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(rank, port, iterations, reps, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4,
                                           init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        payload = "p" * 32
        for _ in range(200):
            rpc.rpc_sync("w1", echo, args=(payload,))
        runs = []
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(iterations):
                rpc.rpc_sync("w1", echo, args=(payload,))
            runs.append((time.perf_counter() - start) / iterations * 1e6)
        out.put(statistics.median(runs))
    rpc.shutdown()


def main():
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    port = free_port()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, port, iterations, reps, out))
             for r in range(2)]
    for p in procs:
        p.start()
    us = out.get(timeout=300)
    for p in procs:
        p.join(timeout=60)
    print(f"torch.distributed.rpc ping-pong (TensorPipe, loopback): {us:.1f} us")


if __name__ == "__main__":
    main()
