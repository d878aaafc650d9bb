"""torch.distributed all_reduce with Gloo on N CPU processes (or NCCL, one
process per GPU): the baseline of tensor-allreduce-bench. Prints one line per size: "<bytes> <median seconds>"."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, sizes, iters, out, backend):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    device = "cpu"
    if backend == "nccl":
        device = f"cuda:{rank % torch.cuda.device_count()}"
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world)
    sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
    results = []
    for nbytes in sizes:
        t = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        dist.all_reduce(t)  # warm-up (and connection setup)
        sync()
        times = []
        for _ in range(iters):
            dist.barrier()
            sync()
            start = time.perf_counter()
            dist.all_reduce(t)
            sync()
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
    backend = sys.argv[5]
    sizes = [int(s) for s in sys.argv[6:]]
    mp.spawn(worker, args=(world, port, sizes, iters, out, backend), nprocs=world)
