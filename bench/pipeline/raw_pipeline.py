#!/usr/bin/env python3
"""The floor under the pipeline job on one GPU (docs/benchmarks.md "Same-GPU
transfers and the pipeline job"): its model, data, GPipe schedule and
microbatches written in plain torch with no monarch, the two stages as two
processes sharing the GPU (what any multi-process program on one GPU can reach
without MPS) or as two streams of one process, beside the single-process
whole-batch baseline of bench/pipeline/single_process.py measured in the same
run.

    python3 bench/pipeline/raw_pipeline.py --mode two-process --pp 2 --hidden 512 \\
        --microbatches 8 --batch 64 --steps 20

Stage 0 runs every microbatch's forward, copying each output into a buffer
shared with stage 1 through CUDA IPC and recording an interprocess event;
stage 1 waits for that event on its stream, copies the activation out, runs
its forward and the loss, then, microbatch by microbatch, its backward,
copying each input gradient into a second shared buffer and recording its own
event, which stage 0's stream waits for before that microbatch's backward.
Each side tells the other through a spinning shared-memory counter that its
event is recorded, so neither host waits for the GPU within a step; both run
the optimizer step, and each step ends with the loss on stage 1's host (as the
job fetches it) and a synchronize on stage 0's. The step time is stage 0's,
median over the steps after two warm-ups; the losses are checked against the
single-process run. ``--mode one-process``: the same kernels, copies and
event waits on two streams of one process. Only the MLP model and --pp 2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import List, Optional, Tuple

import torch
import torch.multiprocessing as mp

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(_HERE, "..", "..", "examples", "pipeline"))
import model  # noqa: E402
import single_process  # noqa: E402
from raw_cuda_ipc import wait_for_flag  # noqa: E402

_WARMUP = 2


class Link:
    """One direction between the stages: a buffer and an event per microbatch
    and how the receiving side learns that the event is recorded."""

    def __init__(self, buffers: List[torch.Tensor], events: List[torch.cuda.Event],
                 flags: Optional[torch.Tensor], index: int):
        self.buffers, self.events, self.flags, self.index = buffers, events, flags, index
        self.sent = 0

    def send(self, j: int, value: torch.Tensor, stream: torch.cuda.Stream) -> None:
        self.buffers[j].copy_(value)
        self.events[j].record(stream)
        self.sent += 1
        if self.flags is not None:
            self.flags[self.index] = self.sent

    def receive(self, j: int, number: int, stream: torch.cuda.Stream) -> torch.Tensor:
        """Microbatch ``j``, the ``number``-th transfer (from 1) of this link."""
        if self.flags is not None:
            wait_for_flag(self.flags, self.index, number)
        stream.wait_event(self.events[j])
        return self.buffers[j].clone()


class Stage:
    """One stage's model, optimizer and step, on its own stream."""

    def __init__(self, cfg: model.Config, index: int):
        self.cfg = cfg
        self.module = model.make_stage(cfg, index)
        self.params = list(self.module.parameters())
        self.opt = model.Optimizer(cfg, self.params)
        self.stream = torch.cuda.Stream()

    def forwards(self, step: int, acts: Link) -> List[torch.Tensor]:
        """Stage 0's forwards, each output sent as it is made."""
        cfg, M = self.cfg, self.cfg.microbatches
        mb = cfg.batch // M
        with torch.cuda.stream(self.stream):
            x, _ = model.make_batch(cfg, step, 0.0)
            outs = []
            for j in range(M):
                out = self.module(x[j * mb:(j + 1) * mb])
                outs.append(out)
                acts.send(j, out.detach(), self.stream)
            return outs

    def backwards(self, step: int, outs: List[torch.Tensor], grads: Link) -> None:
        """Stage 0's backwards, each after its output's gradient arrived;
        then the optimizer step."""
        M = self.cfg.microbatches
        with torch.cuda.stream(self.stream):
            total = [torch.zeros_like(p) for p in self.params]
            for j in range(M):
                g = grads.receive(j, step * M + j + 1, self.stream)
                gs = torch.autograd.grad(outs[j], self.params, grad_outputs=g)
                for t, d in zip(total, gs):
                    t.add_(d)
                outs[j] = None
            self.opt.step(total)

    def last(self, step: int, acts: Link, grads: Link) -> float:
        """Stage 1's step: forwards and loss per arriving activation, then
        backwards (sending input gradients); the loss on the host."""
        cfg, M = self.cfg, self.cfg.microbatches
        mb = cfg.batch // M
        with torch.cuda.stream(self.stream):
            _, y = model.make_batch(cfg, step, 0.0)
            inputs, losses = [], []
            for j in range(M):
                a = acts.receive(j, step * M + j + 1, self.stream).requires_grad_(True)
                out = self.module(a)
                inputs.append(a)
                losses.append(((out - y[j * mb:(j + 1) * mb]) ** 2).mean() / M)
            total = [torch.zeros_like(p) for p in self.params]
            for j in range(M):
                gs = torch.autograd.grad(losses[j], self.params + [inputs[j]])
                for t, d in zip(total, gs[:-1]):
                    t.add_(d)
                grads.send(j, gs[-1], self.stream)
            self.opt.step(total)
            loss = losses[0].detach()
            for l in losses[1:]:
                loss = loss + l.detach()
            return loss.item()


def _buffers(cfg: model.Config) -> List[torch.Tensor]:
    mb = cfg.batch // cfg.microbatches
    return [torch.zeros(model.batch_shape(cfg, mb), device="cuda")
            for _ in range(cfg.microbatches)]


def _stage_one(cfg: model.Config, act_buffers: List[torch.Tensor],
               grad_buffers: List[torch.Tensor], flags: torch.Tensor, act_handles: List[bytes],
               grad_handles: "mp.Queue", losses: torch.Tensor) -> None:
    """Stage 1 in its own process."""
    device = act_buffers[0].device
    torch.cuda.set_device(device)
    acts = Link(act_buffers, [torch.cuda.Event.from_ipc_handle(device, h) for h in act_handles],
                flags, 0)
    grad_events = [torch.cuda.Event(interprocess=True) for _ in grad_buffers]
    grad_handles.put([e.ipc_handle() for e in grad_events])
    grads = Link(grad_buffers, grad_events, flags, 1)
    stage = Stage(cfg, 1)
    for step in range(cfg.steps):
        losses[step] = stage.last(step, acts, grads)  # its .item() ends the step's work


def _timed(stage0: Stage, step: int, acts: Link, grads: Link) -> float:
    t0 = time.perf_counter()
    stage0.backwards(step, stage0.forwards(step, acts), grads)
    stage0.stream.synchronize()
    return time.perf_counter() - t0


def two_process(cfg: model.Config) -> Tuple[List[float], List[float]]:
    ctx = mp.get_context("spawn")
    flags = torch.zeros(2, dtype=torch.int64).share_memory_()
    losses = torch.zeros(cfg.steps, dtype=torch.float64).share_memory_()
    act_buffers, grad_buffers = _buffers(cfg), _buffers(cfg)
    act_events = [torch.cuda.Event(interprocess=True) for _ in act_buffers]
    handles = ctx.Queue()
    child = ctx.Process(target=_stage_one, daemon=True,
                        args=(cfg, act_buffers, grad_buffers, flags,
                              [e.ipc_handle() for e in act_events], handles, losses))
    child.start()
    try:
        grad_events = [torch.cuda.Event.from_ipc_handle(act_buffers[0].device, h)
                       for h in handles.get(timeout=120)]
        acts = Link(act_buffers, act_events, flags, 0)
        grads = Link(grad_buffers, grad_events, flags, 1)
        stage0 = Stage(cfg, 0)
        times = [_timed(stage0, step, acts, grads) for step in range(cfg.steps)]
        child.join(timeout=60)
        if child.exitcode != 0:
            raise RuntimeError(f"stage 1 exited with {child.exitcode}")
    finally:
        if child.is_alive():
            child.kill()
            child.join()
    return times, losses.tolist()


def one_process(cfg: model.Config) -> Tuple[List[float], List[float]]:
    """Both stages from one host thread, in an order that never waits on an
    event not yet recorded: stage 0's forwards, stage 1's step, stage 0's
    backwards."""
    acts = Link(_buffers(cfg), [torch.cuda.Event() for _ in range(cfg.microbatches)], None, 0)
    grads = Link(_buffers(cfg), [torch.cuda.Event() for _ in range(cfg.microbatches)], None, 1)
    stage0, stage1 = Stage(cfg, 0), Stage(cfg, 1)
    times, losses = [], []
    for step in range(cfg.steps):
        t0 = time.perf_counter()
        outs = stage0.forwards(step, acts)
        losses.append(stage1.last(step, acts, grads))
        stage0.backwards(step, outs, grads)
        stage0.stream.synchronize()
        times.append(time.perf_counter() - t0)
    return times, losses


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", default="two-process", choices=["two-process", "one-process"])
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args(argv)
    if a.pp != 2:
        p.error("raw_pipeline.py runs two stages (--pp 2)")
    if a.batch % a.microbatches:
        p.error("--batch must be a multiple of --microbatches")
    if a.steps <= _WARMUP:
        p.error(f"--steps must exceed the {_WARMUP} warm-up steps")
    if not torch.cuda.is_available():
        print("raw_pipeline.py needs a CUDA device", file=sys.stderr)
        return 2
    cfg = model.Config(pp=2, dp=1, microbatches=a.microbatches, batch=a.batch, hidden=a.hidden,
                       layers_per_stage=a.layers, model="mlp", steps=a.steps, device="cuda",
                       lr=a.lr)

    base_times, base_losses = single_process.step_times(cfg)
    times, losses = (two_process if a.mode == "two-process" else one_process)(cfg)
    worst = max(abs(l - b) / max(abs(b), 1e-12) for l, b in zip(losses, base_losses))
    if worst > 1e-4:
        print(f"losses differ from the single-process run by {worst:.2e} (relative)")
        return 1
    base = statistics.median(base_times[_WARMUP:]) * 1e3
    ms = statistics.median(times[_WARMUP:]) * 1e3
    where = ("two processes on one GPU, CUDA IPC" if a.mode == "two-process"
             else "two streams of one process")
    print(f"plain torch pipeline (pp=2, {a.microbatches} microbatches, hidden {a.hidden}), "
          f"{where}: {ms:.3f} ms/step vs single-process whole-batch {base:.3f} ms/step "
          f"({ms / base:.2f}x; medians of steps {_WARMUP}..{a.steps - 1}; losses within "
          f"{worst:.1e} of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
