"""Stage partitioning by the compiler's cost model.

When the user does not fix how many blocks each pipeline stage gets, the job
asks the compiler what each block costs: every distinct block is traced once
on its own (forward and backward of one microbatch on a one-proc mesh), and
``monarch-opt --monarch-simulate`` predicts its time with the same cost model
the overlap passes use (per ATen op FLOPs and bytes; ``device`` or a measured
JSON ``profile``). The stages then get contiguous runs of blocks that
minimise the slowest stage's predicted time, which bounds a pipeline's step.

    costs = layer_costs(cfg, opt)                  # seconds per block
    sizes = balanced_partition(costs, cfg.pp)      # blocks per stage
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

import torch

import model

_STEP_RE = re.compile(r"simulated step ([0-9.]+)us")


def _block_program(cfg: model.Config, layer: int) -> None:
    """Forward and backward of block ``layer`` on one microbatch, on one proc."""
    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"pp": 1})
    with mesh.activate():
        block = model.make_block(cfg, layer)
        rows = cfg.batch // cfg.microbatches
        x = torch.ones(model.batch_shape(cfg, rows), device=cfg.device).requires_grad_(True)
        out = block(x)
        torch.autograd.grad(out.sum(), list(block.parameters()) + [x])


def simulate_seconds(mlir: str, opt: str, device: str = "cpu",
                     profile: Optional[str] = None) -> float:
    """The step time ``monarch-opt --monarch-simulate`` predicts for a program."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "block.mlir")
        with open(src, "w") as f:
            f.write(mlir)
        opts = f"profile={profile}" if profile else f"device={device}"
        out = subprocess.run([opt, src, f"--monarch-simulate={opts}", "-o", os.devnull],
                             capture_output=True, text=True)
    m = _STEP_RE.search(out.stderr)
    if out.returncode != 0 or m is None:
        raise RuntimeError(f"monarch-opt --monarch-simulate failed:\n{out.stderr}")
    return float(m.group(1)) * 1e-6


def _block_kind(cfg: model.Config, layer: int) -> Tuple:
    """Blocks of one kind cost the same: trace each kind once."""
    return (cfg.model, cfg.widths[layer] if cfg.widths else None)


def layer_costs(cfg: model.Config, opt: str, device: Optional[str] = None,
                profile: Optional[str] = None) -> List[float]:
    """Predicted forward + backward seconds of each block for one microbatch."""
    import monarch

    device = device or ("h200" if cfg.device.startswith("cuda") else "cpu")
    one = dataclasses.replace(cfg, pp=1, dp=1, partition=None)
    by_kind: Dict[Tuple, float] = {}
    costs = []
    for layer in range(cfg.num_layers()):
        kind = _block_kind(cfg, layer)
        if kind not in by_kind:
            mlir = monarch.trace(_block_program, one, layer).to_mlir()
            by_kind[kind] = simulate_seconds(mlir, opt, device, profile)
        costs.append(by_kind[kind])
    return costs


def balanced_partition(costs: Sequence[float], stages: int) -> List[int]:
    """Blocks per stage: contiguous, non-empty, minimising the largest stage
    sum (the classic linear-partition dynamic program); ties keep earlier
    stages smaller."""
    n = len(costs)
    if not 1 <= stages <= n:
        raise ValueError(f"cannot split {n} blocks into {stages} non-empty stages")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[k][i]: the smallest possible largest stage of blocks [0, i) in k stages.
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                v = max(best[k - 1][j], prefix[i] - prefix[j])
                if v < best[k][i]:
                    best[k][i], cut[k][i] = v, j
    sizes, i = [], n
    for k in range(stages, 0, -1):
        j = cut[k][i]
        sizes.append(i - j)
        i = j
    return sizes[::-1]


def choose_partition(cfg: model.Config, opt: str, device: Optional[str] = None,
                     profile: Optional[str] = None) -> Tuple[List[int], List[float]]:
    """``cfg.partition`` if the user fixed it, else the cost model's; with the
    per-block costs it was chosen from."""
    costs = layer_costs(cfg, opt, device, profile)
    sizes = list(cfg.partition) if cfg.partition else balanced_partition(costs, cfg.pp)
    return sizes, costs


def stage_costs(costs: Sequence[float], sizes: Sequence[int]) -> List[float]:
    out, i = [], 0
    for n in sizes:
        out.append(sum(costs[i:i + n]))
        i += n
    return out
