"""A pipeline-parallel training job written as ordinary PyTorch + monarch.

An MLP stack (or a small transformer-block stack, ``model="transformer"``) split
into ``pp`` stages with ``mesh.slice(pp=i)``; every step splits the batch into
``microbatches``, runs forward and backward through the stages (activations and
their gradients move between stage meshes with ``to_mesh``), averages the
gradients over the ``dp`` dim with ``reduce_`` and updates the weights with SGD
or Adam.

The same function runs eagerly (every op sent to the workers as it is issued)
or is traced once with ``monarch.trace`` into the monarch dialect, compiled by
monarch-opt and run by monarch-run with no Python at run time (``run.py``).

Everything is deterministic without a shared torch seed: weights and data are
built from ``torch.arange``/``torch.sin`` and the rank's ``dp`` coordinate, so
``reference()`` (one process, plain torch) computes the same losses.

The schedule is the order the program issues work in: GPipe here (every
microbatch's forward, then every backward, last microbatch first). Each worker
executes the instructions of its own stage mesh in that order, so stage 1 runs
microbatch 0's forward while stage 0 runs microbatch 1's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, List, Optional

import torch
import torch.nn as nn


@dataclass
class Config:
    pp: int = 2               # pipeline stages
    dp: int = 2               # data-parallel replicas per stage
    microbatches: int = 4     # m
    batch: int = 16           # rows per dp replica per step (split into m microbatches)
    hidden: int = 32
    layers_per_stage: int = 2
    model: str = "mlp"        # "mlp" or "transformer"
    seq: int = 4              # transformer: tokens per row
    heads: int = 2            # transformer: attention heads
    optimizer: str = "sgd"    # "sgd" or "adam"
    lr: float = 0.05
    steps: int = 20
    schedule: str = "gpipe"   # issue order: "gpipe" or "1f1b"
    # MLP only: the inner width of each block (x + fc2(tanh(fc1(x))), fc1
    # hidden -> width), so blocks differ in cost. None: pp * layers_per_stage
    # blocks x + tanh(fc(x)).
    widths: Optional[List[int]] = None
    # Blocks per stage (sums to the number of blocks). None: even when the
    # blocks are alike, else chosen by the cost model (partition.py).
    partition: Optional[List[int]] = None
    device: str = "cpu"       # where parameters and data live ("cuda": the GPU)
    # Where each step's batch is made: "ops" (tensor ops issued on the
    # mesh) or "remote" (a monarch.remote data loader each worker runs on
    # its own shard: needs Python tensor workers, tensor_worker="python").
    loader: str = "ops"

    def shape(self) -> dict:
        return {"pp": self.pp, "dp": self.dp}

    def num_layers(self) -> int:
        return len(self.widths) if self.widths else self.pp * self.layers_per_stage

    def stage_layers(self) -> List[range]:
        """The block indices of each stage."""
        sizes = self.partition
        if sizes is None:
            if self.widths:
                raise ValueError("blocks of different widths need a partition: "
                                 "pass one or use partition.choose_partition")
            sizes = [self.layers_per_stage] * self.pp
        if len(sizes) != self.pp or sum(sizes) != self.num_layers() or min(sizes) < 1:
            raise ValueError(f"partition {sizes} does not split {self.num_layers()} "
                             f"blocks into {self.pp} non-empty stages")
        starts = [sum(sizes[:i]) for i in range(self.pp)]
        return [range(b, b + n) for b, n in zip(starts, sizes)]


# -- the model ---------------------------------------------------------------------------

class MLPBlock(nn.Module):
    def __init__(self, h: int, device: str = "cpu"):
        super().__init__()
        self.fc = nn.Linear(h, h, device=device)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


class WideMLPBlock(nn.Module):
    def __init__(self, h: int, width: int, device: str = "cpu"):
        super().__init__()
        self.fc1 = nn.Linear(h, width, device=device)
        self.fc2 = nn.Linear(width, h, device=device)

    def forward(self, x):
        return x + self.fc2(torch.tanh(self.fc1(x)))


class TransformerBlock(nn.Module):
    """Pre-norm self-attention + MLP on [rows, seq, hidden]."""

    def __init__(self, h: int, heads: int, device: str = "cpu"):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h, device=device)
        self.qkv = nn.Linear(h, 3 * h, device=device)
        self.proj = nn.Linear(h, h, device=device)
        self.ln2 = nn.LayerNorm(h, device=device)
        self.fc1 = nn.Linear(h, 2 * h, device=device)
        self.fc2 = nn.Linear(2 * h, h, device=device)

    def forward(self, x):
        b, s, h = x.shape
        nh, hd = self.heads, h // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q = q.reshape(b, s, nh, hd).transpose(1, 2)
        k = k.reshape(b, s, nh, hd).transpose(1, 2)
        v = v.reshape(b, s, nh, hd).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(hd)), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(y)
        return x + self.fc2(torch.tanh(self.fc1(self.ln2(x))))


def make_block(cfg: Config, layer: int) -> nn.Module:
    """Block ``layer`` of the model, initialised from its index alone, so any
    partition into stages builds the same model."""
    dev = cfg.device
    if cfg.model == "mlp":
        block = (WideMLPBlock(cfg.hidden, cfg.widths[layer], dev) if cfg.widths
                 else MLPBlock(cfg.hidden, dev))
    elif cfg.model == "transformer":
        block = TransformerBlock(cfg.hidden, cfg.heads, dev)
    else:
        raise ValueError(f"unknown model {cfg.model!r}")
    init_deterministic(block, layer)
    return block


def make_stage(cfg: Config, stage: int) -> nn.Module:
    return nn.Sequential(*[make_block(cfg, j) for j in cfg.stage_layers()[stage]])


def init_deterministic(module: nn.Module, layer: int) -> None:
    """Seeded-looking init of every Linear from deterministic ops (workers share
    no torch seed); LayerNorm keeps its (deterministic) ones/zeros."""
    with torch.no_grad():
        i = 0
        for m in module.modules():
            if not isinstance(m, nn.Linear):
                continue
            for p in (m.weight, m.bias):
                n = p.numel()
                scale = 1.0 / math.sqrt(m.in_features)
                phase = 0.7 * layer + 0.31 * i
                v = torch.sin(torch.arange(n, dtype=torch.float32) * 2.39996 + phase) * scale
                p.copy_(v.reshape(p.shape))
                i += 1


def batch_shape(cfg: Config, rows: int) -> List[int]:
    return [rows, cfg.seq, cfg.hidden] if cfg.model == "transformer" else [rows, cfg.hidden]


def make_batch(cfg: Config, step: Any, dp_rank: Any):
    """This replica's (inputs, targets) for a step; ``step`` and ``dp_rank`` are
    numbers or 0-d tensors (``mesh.rank("dp")``). Four distinct batches, cycled."""
    shape = batch_shape(cfg, cfg.batch)
    n = math.prod(shape)
    k = step % 4
    base = torch.arange(n, dtype=torch.float32, device=cfg.device).reshape(shape)
    x = torch.sin(base * 0.013 + (dp_rank * 1.7 + k * 0.9))
    y = torch.cos(base * 0.021 + (dp_rank * 0.6 + k * 1.3)) * 0.5
    return x, y


def remote_loader(cfg: Config) -> Any:
    """The per-step data loader as a ``monarch.remote`` function: every
    worker makes its own replica's batch from the step and its dp rank (0-d
    tensors on the mesh), as a real loader reads its shard. Inside a
    compiled step or a loop it is one call_function instruction per step
    and stage. The closure travels by value (cloudpickle, with ``cfg``);
    the functions of this file it calls are imported by the workers, which
    start with the controller's sys.path."""
    import monarch

    shape = batch_shape(cfg, cfg.batch)

    def load_batch(step: Any, dp_rank: torch.Tensor, device: str):
        if isinstance(step, torch.Tensor):
            step = step.to(device)
        return make_batch(cfg, step, dp_rank.to(device))

    def shapes(step: Any, dp_rank: Any, device: str):
        return (torch.empty(shape, device=device), torch.empty(shape, device=device))

    return monarch.remote(load_batch, propagate=shapes)


# -- the optimizer -------------------------------------------------------------------------

class Optimizer:
    """SGD or Adam written with plain tensor ops (traced like everything else)."""

    def __init__(self, cfg: Config, params: List[torch.Tensor], tensor_counter: bool = False):
        self.cfg = cfg
        self.params = params
        # The step count: a number, or (a compiled step) a 0-d tensor on the
        # workers, so that the bias correction does not change the ops.
        self.t: Any = torch.zeros((), device=cfg.device) if tensor_counter else 0
        if cfg.optimizer == "adam":
            self.m = [torch.zeros_like(p) for p in params]
            self.v = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self, grads: List[torch.Tensor]) -> None:
        cfg = self.cfg
        if cfg.optimizer == "sgd":
            for p, g in zip(self.params, grads):
                p.sub_(g, alpha=cfg.lr)
            return
        b1, b2, eps = 0.9, 0.999, 1e-8
        if isinstance(self.t, int):
            self.t += 1
            c1 = 1 - b1 ** self.t
            c2 = 1 - b2 ** self.t
        else:
            self.t.add_(1)
            c1 = 1 - torch.pow(b1, self.t)
            c2 = 1 - torch.pow(b2, self.t)
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v / c2).sqrt_().add_(eps)
            if isinstance(c1, float):
                p.addcdiv_(m, denom, value=-cfg.lr / c1)
            else:
                p.sub_(m / denom * (cfg.lr / c1))


# -- the distributed program -----------------------------------------------------------

def train(cfg: Config, mesh: Any, on_step: Any = None, compiled: bool = False,
          looped: bool = False) -> List[Any]:
    """Runs ``cfg.steps`` steps on ``mesh`` (dims pp, dp); returns the loss of each
    step as a future (``monarch.fetch_shard`` of the dp-averaged loss).

    ``compiled``: the step is ``monarch.compile``d -- traced on its first calls,
    then one instruction per step (docs/python.md "Compiled steps"). Its
    step-dependent numbers (which batch, Adam's bias correction) are then
    tensors on the workers, updated in place, instead of Python numbers that
    would change the ops every step.

    ``looped``: the steps are a ``monarch.range`` loop with the same tensor
    counters, so a traced job is one loop whatever its number of steps
    (docs/python.md "Loops"); traced, only the first two steps' futures are
    returned (the rest are fetched by the loop and printed by monarch-run)."""
    import monarch

    job = Job(cfg, mesh, tensor_counters=compiled or looped)
    step = monarch.compile(job.step) if compiled else job.step
    losses = []
    steps = monarch.range(cfg.steps, mesh=mesh) if looped else range(cfg.steps)
    for k, _ in enumerate(steps):
        losses.append(step(job.counters) if compiled or looped else step(k))
        if on_step is not None:
            on_step(k, losses[-1])
    return losses


class Job:
    """The stages, their parameters and optimizers; ``step`` is one training
    step (``k``: the step number, or the counter tensors of a compiled job)."""

    def __init__(self, cfg: Config, mesh: Any, tensor_counters: bool = False):
        assert cfg.batch % cfg.microbatches == 0, "batch must divide into microbatches"
        self.cfg = cfg
        self.stages_mesh = [mesh.slice(pp=i) for i in range(cfg.pp)]
        self.load = remote_loader(cfg) if cfg.loader == "remote" else None
        self.stages, self.params, self.opts = [], [], []
        #: Per stage mesh, the step number as a 0-d tensor (tensor_counters).
        self.counters: List[Any] = []
        for i, sm in enumerate(self.stages_mesh):
            with sm.activate():
                stage = make_stage(cfg, i)
                ps = list(stage.parameters())
                self.stages.append(stage)
                self.params.append(ps)
                self.opts.append(Optimizer(cfg, ps, tensor_counter=tensor_counters))
                if tensor_counters:
                    self.counters.append(torch.zeros((), device=cfg.device))

    @staticmethod
    def _batch_step(k: Any, stage: int) -> Any:
        """The step number make_batch is given: ``k``, or the stage's counter."""
        return k if isinstance(k, int) else k[stage]

    def step(self, k: Any) -> Any:
        import monarch

        cfg = self.cfg
        P, M = cfg.pp, cfg.microbatches
        mb = cfg.batch // M
        stages_mesh, stages, params, opts = self.stages_mesh, self.stages, self.params, self.opts
        batches = make_batch if self.load is None else (
            lambda cfg, step, r: self.load(step, r, cfg.device))
        with stages_mesh[0].activate():
            x, _ = batches(cfg, self._batch_step(k, 0), stages_mesh[0].rank("dp"))
            xs = [x[j * mb:(j + 1) * mb] for j in range(M)]
        with stages_mesh[-1].activate():
            _, y = batches(cfg, self._batch_step(k, P - 1), stages_mesh[-1].rank("dp"))
            ys = [y[j * mb:(j + 1) * mb] for j in range(M)]

        # Per (stage, microbatch): the stage's input (a leaf that requires grad)
        # and output, kept for the backward.
        inputs = [[None] * M for _ in range(P)]
        outputs = [[None] * M for _ in range(P)]
        mb_losses = [None] * M
        grads = [[None] * len(params[i]) for i in range(P)]

        def forward(j: int) -> None:
            act = xs[j]
            for i in range(P):
                if i > 0:
                    act = act.to_mesh(stages_mesh[i])
                with stages_mesh[i].activate():
                    # Stage 0's input requires grad too and its gradient is asked
                    # for (then unused): otherwise LayerNorm's backward gets
                    # output_mask [false, true, true], returns an undefined first
                    # tensor, and the plan binds its results off by one (frontend
                    # bug, see docs/pipeline.md).
                    a = act.detach().requires_grad_(True)
                    inputs[i][j] = a
                    out = stages[i](a)
                    outputs[i][j] = out
                    if i == P - 1:
                        mb_losses[j] = ((out - ys[j]) ** 2).mean() / M
                    act = out.detach()

        def backward(j: int) -> None:
            g_out = None
            for i in reversed(range(P)):
                if i < P - 1:
                    g_out = g_out.to_mesh(stages_mesh[i])
                with stages_mesh[i].activate():
                    wrt = params[i] + [inputs[i][j]]   # stage 0 too: see forward()
                    if i == P - 1:
                        gs = torch.autograd.grad(mb_losses[j], wrt)
                    else:
                        # sum(out * g) has out's vector-Jacobian product as its
                        # gradient. (grad_outputs= would be the direct way, but
                        # torch 1.13's autograd calls aten::is_same_size on it,
                        # which the frontend refuses: see docs/pipeline.md.)
                        gs = torch.autograd.grad((outputs[i][j] * g_out).sum(), wrt)
                    for n, g in enumerate(gs[:len(params[i])]):
                        grads[i][n] = g if grads[i][n] is None else grads[i][n] + g
                    if i > 0:
                        g_out = gs[-1]
                    outputs[i][j] = None
                    inputs[i][j] = None

        if cfg.schedule == "gpipe":
            for j in range(M):
                forward(j)
            for j in range(M):
                backward(j)
        elif cfg.schedule == "1f1b":
            # One global order in which stage i runs (P - i) warm-up forwards, then
            # alternates one forward and one backward (see docs/pipeline.md).
            order = one_f_one_b(P, M)
            for kind, j in order:
                (forward if kind == "F" else backward)(j)
        else:
            raise ValueError(f"unknown schedule {cfg.schedule!r}")

        for i, sm in enumerate(stages_mesh):
            with sm.activate():
                if cfg.dp > 1:
                    for g in grads[i]:
                        g.reduce_("dp", "avg")
                opts[i].step(grads[i])
                if not isinstance(k, int):
                    k[i].add_(1)
        with stages_mesh[-1].activate():
            loss = mb_losses[0].detach()
            for l in mb_losses[1:]:
                loss = loss + l.detach()
            if cfg.dp > 1:
                loss = loss.reduce("dp", "avg")
        return monarch.fetch_shard(loss, dp=0)


def one_f_one_b(P: int, M: int) -> List[tuple]:
    """The order whole-microbatch forwards/backwards are issued in so that the
    first stage keeps at most P microbatches in flight (a coarse 1F1B: the
    compiler's pipeline-schedule pass refines it per stage)."""
    order, f, b = [], 0, 0
    while f < min(P, M):
        order.append(("F", f)); f += 1
    while b < M:
        order.append(("B", b)); b += 1
        if f < M:
            order.append(("F", f)); f += 1
    return order


def program(cfg: Config, backend: Optional[str] = None, looped: bool = False) -> List[Any]:
    """The whole job: spawn the mesh, train; the loss futures."""
    from monarch.actor import this_host

    kw = {} if backend is None else {"backend": backend}
    mesh = this_host().spawn_procs(cfg.shape(), **kw)
    return train(cfg, mesh, looped=looped)


# -- the single-process reference -------------------------------------------------------

def reference(cfg: Config) -> List[float]:
    """The same model, data and optimizer in one process of plain torch: the
    full batch (all dp replicas) at once, no microbatches, on the CPU."""
    cfg = dataclasses.replace(cfg, device="cpu")
    stages = [make_stage(cfg, i) for i in range(cfg.pp)]
    params = [p for s in stages for p in s.parameters()]
    opt = Optimizer(cfg, params)
    losses = []
    for step in range(cfg.steps):
        xs, ys = zip(*[make_batch(cfg, step, float(r)) for r in range(cfg.dp)])
        x, y = torch.cat(xs), torch.cat(ys)
        out = x
        for s in stages:
            out = s(out)
        loss = ((out - y) ** 2).mean()
        grads = torch.autograd.grad(loss, params)
        opt.step(list(grads))
        losses.append(loss.item())
    return losses
