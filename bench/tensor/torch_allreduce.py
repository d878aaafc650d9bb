"""torch.distributed all_reduce with Gloo on N CPU processes: the baseline of
tensor-allreduce-bench. Prints one line per size: "<bytes> <median seconds>"."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, sizes, iters, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    results = []
    for nbytes in sizes:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        dist.all_reduce(t)  # warm-up (and connection setup)
        times = []
        for _ in range(iters):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - start)
        times.sort()
        results.append((nbytes, times[len(times) // 2]))
    # Slowest rank per size is the collective's time.
    gathered = [None] * world
    dist.all_gather_object(gathered, results)
    if rank == 0:
        with open(out, "w") as f:
            for i, (nbytes, _) in enumerate(results):
                f.write(f"{nbytes} {max(g[i][1] for g in gathered)}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    iters = int(sys.argv[4])
    sizes = [int(s) for s in sys.argv[5:]]
    mp.spawn(worker, args=(world, port, sizes, iters, out), nprocs=world)
