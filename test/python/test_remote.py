"""monarch.remote and the rref adverb: Python functions and actor endpoints
run on every rank over distributed tensors (docs/python.md, "Remote functions",
"Actors on distributed tensors").

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest test/python/test_remote.py

Each scenario runs on the in-process simulation ("sim") and on Python tensor
workers (backend "c", tensor_worker="python": the C++ executor in Python
worker processes). Module-level remote functions are imported by the
workers by module and name; lambdas, closures and functions of the
controller's __main__ travel by value (cloudpickle).

The tensors are made on the test device (``device``); remote functions and
actors get local shards on it, actors allocate their own tensors on it where
their process has a GPU (``_actor_device``), and the fetches' source_device
shows where the results live.
"""

from __future__ import annotations

import os

import pytest
import torch

import monarch
from monarch import RemoteException
from monarch.actor import Actor, current_rank, endpoint, this_host

from conftest import placed_on


def _actor_device(device: str) -> str:
    """Where an actor (or remote function) allocates tensors asked for on
    ``device``: decided in its own process, the CPU where it has no GPU."""
    return device if torch.cuda.is_available() else "cpu"


def _fetch_on(t, device, **coords):
    """The value of a fetch, after checking the worker held it on ``device``."""
    fut = monarch.fetch_shard(t, **coords)
    value = fut.get()
    assert fut.source_device.startswith(placed_on(device)), (fut.source_device, device)
    return value


def _scaled_matmul(x, w, scale):
    return (x @ w) * scale


matmul = monarch.remote(_scaled_matmul, propagate=lambda x, w, scale: x @ w)


@monarch.remote(propagate="cached")
def split_rows(x):
    # data-dependent on nothing but shapes; returns two results
    return x[: x.shape[0] // 2].clone(), x.sum(dim=0, keepdim=True)


@monarch.remote
def plus_rank_id(x, offsets):
    return x + offsets[0]


@monarch.remote(propagate=lambda x: x)
def broken(x):
    raise ValueError("broken on purpose")


@monarch.remote(propagate=lambda x: (x, x))
def wrong_count(x):
    return x


_PYTHON_WORKERS = {"backend": "c", "tensor_worker": "python"}


@pytest.fixture(scope="module")
def meshes():
    """Meshes by spawn arguments, shared by the module's tests (each Python
    tensor worker imports torch: seconds to start)."""
    made = {}

    def get(**kwargs):
        key = tuple(sorted(kwargs.items()))
        if key not in made:
            made[key] = this_host().spawn_procs({"gpu": 2}, **kwargs)
        return made[key]

    yield get
    for m in made.values():
        m.stop()


def _backends():
    out = [pytest.param({"backend": "sim"}, id="sim")]
    import importlib.util

    # find_spec only: the controller never imports the worker's extension.
    if all(importlib.util.find_spec(m) for m in ("monarch._C", "monarch._tensor_worker")):
        out.append(pytest.param(_PYTHON_WORKERS, id="python-worker"))
    else:
        out.append(pytest.param({}, id="python-worker", marks=pytest.mark.skip(
            reason="monarch._C / monarch._tensor_worker not built")))
    return out


@pytest.fixture(params=_backends())
def mesh(request, meshes):
    return meshes(**request.param)


def test_remote_runs_on_every_rank_with_local_shards(mesh, device):
    with mesh.activate():
        x = torch.ones(3, 4, device=device) * (mesh.rank("gpu") + 1)
        w = torch.ones(4, 2, device=device)
        y = matmul(x, w, 0.5)
        assert isinstance(y, monarch.Tensor) and tuple(y.shape) == (3, 2)
        z = y + 1  # usable by later operations
    assert torch.equal(monarch.inspect(z, gpu=0), torch.full((3, 2), 3.0))
    assert torch.equal(monarch.inspect(z, gpu=1), torch.full((3, 2), 5.0))
    # the function ran on the device's shards: its result lives there
    _fetch_on(y, device, gpu=1)
    _fetch_on(z, device, gpu=0)


def test_remote_results_are_tracked_on_their_device(mesh, device):
    """A remote function's result used with a tensor of the device it lives on."""
    with mesh.activate():
        x = torch.ones(3, 4, device=device)
        y = matmul(x, torch.ones(4, 4, device=device), 0.5)
        z = y + x
    assert torch.equal(_fetch_on(z, device, gpu=1), torch.full((3, 4), 3.0))


def test_cached_propagate_learns_shapes_once(mesh, device):
    with mesh.activate():
        x = torch.arange(12.0, device=device).reshape(6, 2) + mesh.rank("gpu")
        top, total = split_rows(x)
        assert tuple(top.shape) == (3, 2) and tuple(total.shape) == (1, 2)
        assert len(split_rows._cached) == 1
        top2, _ = split_rows(x * 2)
        assert len(split_rows._cached) == 1  # same shapes: no second probe
    assert torch.equal(monarch.inspect(top, gpu=1), torch.arange(6.0).reshape(3, 2) + 1)
    assert torch.equal(monarch.inspect(total, gpu=0), torch.tensor([[30.0, 36.0]]))
    assert torch.equal(monarch.inspect(top2, gpu=0), torch.arange(6.0).reshape(3, 2) * 2)
    _fetch_on(top, device, gpu=0)
    _fetch_on(total, device, gpu=1)


def test_default_propagate_runs_the_function_on_fake_tensors(mesh, device):
    with mesh.activate():
        x = torch.zeros(2, 2, device=device)
        y = plus_rank_id(x, [mesh.rank("gpu")])  # a 0-d CPU rank added to a device shard
    assert torch.equal(_fetch_on(y, device, gpu=1), torch.ones(2, 2))


def test_remote_exception_is_reported_at_the_use(mesh, device):
    with mesh.activate():
        y = broken(torch.zeros(2, device=device))
        with pytest.raises(RemoteException, match="broken on purpose"):
            monarch.inspect(y + 1, gpu=0)
        a, b = wrong_count(torch.zeros(2, device=device))  # propagate promised two results
        with pytest.raises(RemoteException, match="produced 1 tensors but the instruction binds 2 results"):
            monarch.inspect(b, gpu=0)


def test_remote_rejects_bad_propagate():
    with pytest.raises(ValueError, match="'mocked' is not supported"):
        monarch.remote(_scaled_matmul, propagate="mocked")
    with pytest.raises(ValueError, match="propagate"):
        monarch.remote(_scaled_matmul, propagate="guess")
    with pytest.raises(TypeError, match="propagate"):
        monarch.remote(_scaled_matmul, propagate=3)


def _bump(x):
    x.add_(10)


def test_remote_by_import_path(mesh, device):
    """Monarch's remote("pkg.module.fn"): the workers import the function; a
    torch path is looked up from torch; propagate None means "cached"."""
    by_path = monarch.remote("test_remote._scaled_matmul", propagate=lambda x, w, s: x @ w)
    assert by_path.name == matmul.name  # the same function, by module and name
    relu = monarch.remote("torch.nn.functional.relu")
    assert relu.name == "python:torch:nn.functional.relu"
    with mesh.activate():
        x = torch.ones(2, 3, device=device) * (mesh.rank("gpu") - 1)  # -1 on gpu 0, 0 on 1
        y = by_path(x, torch.ones(3, 1, device=device), 2.0)
        r = relu(x + 0.5)
        assert tuple(r.shape) == (2, 3) and len(relu._cached) == 1
    assert monarch.inspect(y, gpu=0).tolist() == [[-6.0], [-6.0]]
    assert monarch.inspect(r, gpu=0).tolist() == [[0.0] * 3] * 2
    assert monarch.inspect(r, gpu=1).tolist() == [[0.5] * 3] * 2
    _fetch_on(r, device, gpu=1)


def test_remote_inspect_runs_for_its_effects(mesh, device):
    bump = monarch.remote("test_remote._bump", propagate="inspect")
    with mesh.activate():
        x = torch.zeros(2, device=device) + mesh.rank("gpu")
        assert bump(x) is None
        y = x * 2
    assert monarch.inspect(y, gpu=1).tolist() == [22.0, 22.0]


def test_remote_path_that_does_not_import():
    with pytest.raises(ValueError, match="import path"):
        monarch.remote("nodots")
    missing = monarch.remote("no_such_package_here.fn", propagate=lambda x: x)
    assert missing.name == "python:no_such_package_here:fn"
    with pytest.raises(RuntimeError, match="does not import in the controller"):
        missing(torch.ones(1))  # nothing distributed: an ordinary call, here


def test_remote_path_that_does_not_import_on_the_workers(mesh, device):
    missing = monarch.remote("no_such_package_here.fn", propagate=lambda x: x)
    with mesh.activate():
        y = missing(torch.ones(2, device=device))
        with pytest.raises(RemoteException, match="no_such_package_here"):
            monarch.inspect(y, gpu=0)


def test_lambdas_and_local_functions_travel_by_value(mesh, device):
    scale = 3.0

    def local_scale(x):  # a closure: no worker could import it
        return x * scale

    by_value = [monarch.remote(lambda x: x + 1, propagate=lambda x: x),
                monarch.remote(local_scale, propagate=lambda x: x)]
    assert all(f.name.startswith("python:@") for f in by_value)
    assert not matmul.name.startswith("python:@")  # importable: by name
    with mesh.activate():
        x = torch.ones(2, device=device) + mesh.rank("gpu")
        y = by_value[1](by_value[0](x))
    assert monarch.inspect(y, gpu=1).tolist() == [9.0, 9.0]
    _fetch_on(y, device, gpu=1)


def test_remote_outside_a_mesh_is_an_ordinary_call():
    assert torch.equal(matmul(torch.ones(1, 2), torch.ones(2, 1), 2.0), torch.tensor([[4.0]]))


# -- rref: actors beside the tensor workers ------------------------------------------

class LinearActor(Actor):
    """The seed's example: a weight per rank, forward on the local shard.
    The weight is made on ``device`` where this process has a GPU."""

    def __init__(self, scale: float, device: str = "cpu"):
        self.w = torch.eye(4, device=_actor_device(device)) * scale * (current_rank()["gpu"] + 1)
        self.calls = 0

    @endpoint(propagate=lambda x: x)
    def forward(self, x):
        self.calls += 1
        return x @ self.w

    @endpoint(propagate="cached")
    def halves(self, x):
        return x[: x.shape[0] // 2] @ self.w, x[x.shape[0] // 2:] @ self.w

    @endpoint
    def count(self) -> int:
        return self.calls

    @endpoint(propagate=lambda x: x)
    def refuse(self, x):
        raise ValueError(f"refused on rank {current_rank()['gpu']}")

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def weight_device(self) -> str:
        return str(self.w.device)


_NATIVE_WORKERS = {"backend": "c", "tensor_worker": "native"}


@pytest.fixture(params=["python", "native"])
def python_workers(request, meshes):
    """A mesh whose actors rref reaches: in the Python tensor workers'
    processes ("python"), or in processes of their own beside native tensor
    workers ("native", through the call's route)."""
    import importlib.util

    needed = ("monarch._C", "monarch._tensor_worker") if request.param == "python" else (
        "monarch._C",)
    if not all(importlib.util.find_spec(m) for m in needed):
        pytest.skip(f"{' / '.join(needed)} not built")
    return meshes(**(_PYTHON_WORKERS if request.param == "python" else _NATIVE_WORKERS))


def _beside_workers(mesh) -> bool:
    return mesh._session.tensor_worker == "python"


def test_rref_linear_actor(python_workers, device):
    mesh = python_workers
    linear = mesh.spawn(f"linear_{device}", LinearActor, 0.5, device)
    pids = set(linear.pid.call().get(timeout=10).values())
    workers = set(mesh._session._backend.pids())
    if _beside_workers(mesh):  # the actors share a process with their rank's worker
        assert pids == workers
    else:  # processes of their own
        assert len(pids) == 2 and not pids & workers
    # ... and made their weights on the device (the CPU where there is no GPU).
    assert all(d.startswith(placed_on(device))
               for d in linear.weight_device.call().get(timeout=10).values())
    with mesh.activate():
        x = torch.ones(3, 4, device=device) + mesh.rank("gpu")
        y = linear.forward.rref(x)
        assert isinstance(y, monarch.Tensor) and tuple(y.shape) == (3, 4)
        z = y.sum()
    assert torch.equal(monarch.inspect(y, gpu=0), torch.full((3, 4), 0.5))
    assert torch.equal(monarch.inspect(y, gpu=1), torch.full((3, 4), 2.0))
    assert monarch.inspect(z, gpu=1).item() == 24.0
    # The endpoint's results are the rank's shards, on the device.
    _fetch_on(y, device, gpu=1)
    _fetch_on(z, device, gpu=0)
    # Ordinary adverbs reach the same actors.
    assert linear.count.call().get(timeout=10).values() == [1, 1]


def test_rref_results_are_tracked_on_their_device(python_workers, device):
    """An rref result used with a tensor of the device it lives on."""
    mesh = python_workers
    linear = mesh.spawn(f"linear_tracked_{device}", LinearActor, 1.0, device)
    with mesh.activate():
        x = torch.ones(3, 4, device=device)
        z = linear.forward.rref(x) + x
    assert torch.equal(_fetch_on(z, device, gpu=1), torch.full((3, 4), 3.0))


def test_rref_cached_propagate(python_workers, device):
    mesh = python_workers
    name = f"linear_cached_{device}"
    linear = mesh.spawn(name, LinearActor, 1.0, device)
    with mesh.activate():
        x = torch.ones(4, 4, device=device) * (mesh.rank("gpu") + 1)
        top, bottom = linear.halves.rref(x)  # first call: one probe on rank 0
        assert tuple(top.shape) == (2, 4) and tuple(bottom.shape) == (2, 4)
        again, _ = linear.halves.rref(x + 1)  # same shapes: no probe
    assert len(linear._state.cached_meta[(name, "halves")]) == 1
    assert torch.equal(monarch.inspect(bottom, gpu=1), torch.full((2, 4), 4.0))
    assert torch.equal(monarch.inspect(again, gpu=0), torch.full((2, 4), 2.0))
    _fetch_on(top, device, gpu=0)
    _fetch_on(again, device, gpu=1)


def test_rref_endpoint_error_is_reported_at_the_use(python_workers, device):
    """An endpoint that raises fails its results (the error names it); the
    actor serves on."""
    mesh = python_workers
    linear = mesh.spawn(f"linear_refuse_{device}", LinearActor, 1.0, device)
    with mesh.activate():
        y = linear.refuse.rref(torch.ones(2, 4, device=device))
        with pytest.raises(RemoteException, match="ValueError: refused on rank 1"):
            monarch.inspect(y + 1, gpu=1)
        z = linear.forward.rref(torch.ones(2, 4, device=device))
    assert torch.equal(monarch.inspect(z, gpu=1), torch.full((2, 4), 2.0))
    assert linear.count.call().get(timeout=10).values() == [1, 1]


def test_rref_needs_propagate(python_workers):
    linear = python_workers.spawn(f"linear2_{_beside_workers(python_workers)}", LinearActor, 1.0)
    with pytest.raises(ValueError, match="propagate"):
        linear.count.rref()


def test_main_defined_remote_function(tmp_path, device):
    import subprocess
    import sys
    import textwrap

    backends = ["{'backend': 'sim'}"]
    import importlib.util

    if all(importlib.util.find_spec(m) for m in ("monarch._C", "monarch._tensor_worker")):
        backends.append(repr(_PYTHON_WORKERS))
    script = tmp_path / "main_remote.py"
    runs = tmp_path / "runs.txt"
    script.write_text(textwrap.dedent(f"""
        import torch
        import monarch
        from monarch.actor import this_host

        with open({str(runs)!r}, "a") as f:   # once per execution of this file
            f.write("ran\\n")

        @monarch.remote(propagate=lambda x: x)
        def double(x):
            return x * 2

        for kwargs in [{", ".join(backends)}]:
            mesh = this_host().spawn_procs({{"gpu": 2}}, **kwargs)
            with mesh.activate():
                y = double(torch.ones(2, device={device!r}) + mesh.rank("gpu"))
            fut = monarch.fetch_shard(y, gpu=1)
            print(kwargs["backend"], fut.get().tolist(), "on", fut.source_device)
            mesh.stop()
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "sim [4.0, 4.0]" in out.stdout
    assert f"sim [4.0, 4.0] on {placed_on(device)}" in out.stdout
    if len(backends) == 2:
        assert "c [4.0, 4.0]" in out.stdout
        assert f"c [4.0, 4.0] on {placed_on(device)}" in out.stdout
    # Sent by value: no worker re-ran the script's top level.
    assert runs.read_text().split() == ["ran"], runs.read_text()
