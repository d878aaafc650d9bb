"""The seed programs, deterministic, as functions of a backend and a device.

Each returns the values it fetched (``monarch.inspect``), so the eager run and
the traced run (MLIR -> plan -> workers) can be compared value by value.
``device`` is where the programs' tensors live on the workers ("cpu" or
"cuda"); fetched values always come back on the controller's CPU, and the
single-process references (``*_local``) compute on the CPU.
"""

from __future__ import annotations

from typing import Any, List

import torch
import torch.nn as nn

import monarch
from monarch.actor import this_host


POOL = None  # set by conftest: shares C++ worker meshes between tests


def _spawn(backend: str, shape: dict) -> Any:
    from monarch._src.tensor import tracing as _trace_mlir

    if POOL is not None and _trace_mlir.current() is None:
        m = POOL(backend, shape)
        if m is not None:
            m._pooled = True
            return m
    return this_host().spawn_procs(shape, backend=backend)


def _release(mesh: Any) -> None:
    if not getattr(mesh, "_pooled", False):
        mesh.stop()


def matmul(backend: str, device: str = "cpu") -> List[Any]:
    mesh = _spawn(backend, {"host": 2, "gpu": 2})
    with mesh.activate():
        r = mesh.rank(("host", "gpu"))  # a 0-d CPU tensor: a constant to any device
        t = torch.arange(12.0, device=device).reshape(3, 4) / 10 + r
        dist_compute = t @ t.T
    out = []
    for h in range(2):
        for g in range(2):
            out.append(monarch.inspect(dist_compute, host=h, gpu=g))
    out.append(monarch.fetch_shard(t, host=1, gpu=0).get())
    _release(mesh)
    return out


def reduce(backend: str, device: str = "cpu") -> List[Any]:
    mesh = _spawn(backend, {"host": 2, "gpu": 2})
    with mesh.activate():
        x = torch.arange(1.0, 5.0, device=device) * (mesh.rank("host") * 10 + mesh.rank("gpu") + 1)
        results = [
            x.reduce("gpu", "sum"),
            x.reduce("host", "avg"),
            x.reduce(("host", "gpu"), "max"),
            x.reduce((), "product"),
            x.reduce("gpu", "stack"),
            x.reshape(2, 2).reduce("host", "sum", scatter=True),
        ]
        y = x.clone()
        y.reduce_("gpu", "min")
        results.append(y)
    out = [monarch.inspect(t, host=h, gpu=g) for t in results for h in range(2) for g in range(2)]
    _release(mesh)
    return out


def rename_split(backend: str, device: str = "cpu") -> List[Any]:
    remote_mesh = _spawn(backend, {"host": 2, "gpu": 2})
    mesh_2d = remote_mesh.rename(host="dp", gpu="tp")
    mesh_3d = remote_mesh.split(host=("dp", "pp"), gpu=("tp",), pp=2)
    with mesh_2d.activate():
        a = torch.ones(2, device=device) * mesh_2d.rank(("dp", "tp"))
        s = a.reduce("tp", "sum")
    with mesh_3d.activate():
        b = torch.ones(2, device=device) * mesh_3d.rank("pp")
        c = b.reduce("pp", "stack")
    out = [monarch.inspect(s, dp=1, tp=0), monarch.inspect(c, dp=0, pp=1, tp=1)]
    _release(remote_mesh)
    return out


def _init_deterministic(module: nn.Module, seed: int, device: str = "cpu") -> None:
    """Parameters set to fixed values; ``device`` is where the module lives
    (the values are made there, so the copy does not cross devices)."""
    with torch.no_grad():
        for i, p in enumerate(module.parameters()):
            values = torch.arange(p.numel(), dtype=p.dtype, device=device).reshape(p.shape)
            p.copy_((values - seed - i) / 17)


def forward_pipeline(meshes: List[Any], stages: List[nn.Module], x: Any) -> Any:
    """The seed's pipeline forward: each stage on its own mesh, the
    activations moved to the next stage's mesh with to_mesh."""
    with torch.no_grad():
        for stage_mesh, stage in zip(meshes, stages):
            x = x.to_mesh(stage_mesh)
            with stage_mesh.activate():
                x = stage(x)
        return x


def pipeline(backend: str, device: str = "cpu") -> List[Any]:
    remote_mesh = _spawn(backend, {"host": 2, "gpu": 2})
    pipeline_mesh = remote_mesh.rename(host="pp")
    meshes = [pipeline_mesh.slice(pp=i) for i in range(pipeline_mesh.size("pp"))]
    stages = []
    for k, stage_mesh in enumerate(meshes):
        with stage_mesh.activate():
            layers = []
            for _ in range(2):
                layers.extend([nn.Linear(4, 4, device=device), nn.ReLU()])
            stage = nn.Sequential(*layers)
            _init_deterministic(stage, k, device)
            stages.append(stage)

    with meshes[0].activate():
        inp = torch.arange(12.0, device=device).reshape(3, 4) / 12 + meshes[0].rank("gpu")
    out = forward_pipeline(meshes, stages, inp)
    values = [monarch.inspect(out, gpu=0), monarch.inspect(out, gpu=1)]
    _release(remote_mesh)
    return values


def pipeline_local() -> List[Any]:
    """The same stages run locally (one per gpu column)."""
    values = []
    for g in range(2):
        x = torch.arange(12.0).reshape(3, 4) / 12 + g
        with torch.no_grad():
            for k in range(2):
                layers = []
                for _ in range(2):
                    layers.extend([nn.Linear(4, 4), nn.ReLU()])
                stage = nn.Sequential(*layers)
                _init_deterministic(stage, k)
                x = stage(x)
        values.append(x)
    return values


def ddp(backend: str, device: str = "cpu", comms: bool = False, steps: int = 3,
        lr: float = 0.5) -> List[Any]:
    mesh = _spawn(backend, {"host": 2, "gpu": 2})
    dp = mesh.flatten("dp")
    stream = monarch.Stream("comms") if comms else None
    with dp.activate():
        r = dp.rank("dp")
        x = (torch.arange(8.0, device=device).reshape(2, 4) + r * 8) / 32
        y = (torch.arange(6.0, device=device).reshape(2, 3) + r * 6) / 24
        model = nn.Linear(4, 3, device=device)
        _init_deterministic(model, 0, device)
        params = list(model.parameters())
        for _ in range(steps):
            loss = ((model(x) - y) ** 2).mean()
            borrows = []
            grads = []
            for g in monarch.grad_generator(loss, list(reversed(params))):
                if stream is None:
                    g.reduce_("dp", "avg")
                else:
                    g_c, borrow = stream.borrow(g, mutable=True)
                    with stream.activate():
                        g_c.reduce_("dp", "avg")
                    borrows.append(borrow)
                grads.append(g)
            for borrow in borrows:
                borrow.drop()
            with torch.no_grad():
                for p, g in zip(reversed(params), grads):
                    p -= lr * g
    out = [monarch.inspect(p, dp=k) for p in params for k in range(4)]
    _release(mesh)
    return out


def ddp_local(steps: int = 3, lr: float = 0.5) -> List[Any]:
    X = torch.arange(32.0).reshape(8, 4) / 32
    Y = torch.arange(24.0).reshape(8, 3) / 24
    model = nn.Linear(4, 3)
    _init_deterministic(model, 0)
    params = list(model.parameters())
    for _ in range(steps):
        loss = ((model(X) - Y) ** 2).mean()
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= lr * g
    return [p.detach() for p in params for _ in range(4)]


def failure(backend: str, device: str = "cpu") -> List[Any]:
    mesh = _spawn(backend, {"gpu": 2})
    with mesh.activate():
        # The failing op stays on the CPU: an index out of range is a CPU
        # bounds check there, but on CUDA a device-side assert, which leaves
        # the worker's CUDA context unusable for everything after it (no
        # error on a GPU is "not fatal" that way). The independent value is
        # on the device.
        src = torch.arange(4.0)
        idx = torch.full((1,), 7, dtype=torch.int64)
        bad = torch.index_select(src, 0, idx)
        dep = bad * 2
        fine = torch.arange(4.0, device=device) + 1
    out: List[Any] = []
    for t in (dep, fine):
        try:
            out.append(monarch.inspect(t, gpu=1))
        except monarch.RemoteException as e:
            out.append(e)
    _release(mesh)
    return out


PROGRAMS = {
    "matmul": matmul,
    "reduce": reduce,
    "rename_split": rename_split,
    "pipeline": pipeline,
    "ddp": ddp,
    "ddp_comms": lambda backend, device="cpu": ddp(backend, device, comms=True),
    "failure": failure,
}
