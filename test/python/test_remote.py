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
import textwrap

import pytest
import torch

import monarch
from monarch import RemoteException
from monarch.actor import Actor, ValueMesh, current_rank, endpoint, this_host

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


# -- the adverbs: fn.call / call_one / choose / stream / broadcast, send(fn, ...) -------
#
# As in Monarch, a remote function is also an endpoint: under mesh.activate()
# each rank of the active mesh runs it (on a hidden actor of its proc) and the
# adverbs give back whatever it returns. These run on the simulation, on
# native tensor workers (the default) and on Python tensor workers.

@monarch.remote
def whoami(tag=None):
    """Any picklable value: this process and the rank's point in the mesh called."""
    return {"pid": os.getpid(), "point": dict(current_rank()), "tag": tag}


@monarch.remote
def shard_of(x, scale=1):
    """A distributed tensor argument: the rank's local shard, an ordinary tensor."""
    assert type(x) is torch.Tensor, type(x)
    return (x * scale).tolist()


@monarch.remote
def doubled(x):
    return x * 2


@monarch.remote
def note(path, text):
    with open(path, "a") as f:
        f.write(f"{dict(current_rank())} {text}\n")


@monarch.remote
def fails(x):
    raise ValueError(f"fails on purpose with {x}")


def _adverb_backends():
    import importlib.util

    out = [pytest.param({"backend": "sim"}, id="sim")]
    built = importlib.util.find_spec("monarch._C") is not None
    out.append(pytest.param({"backend": "c"}, id="native-worker", marks=[] if built else
                            pytest.mark.skip(reason="monarch._C not built")))
    out.append(_backends()[1])
    return out


@pytest.fixture(params=_adverb_backends())
def adverb_mesh(request, meshes):
    return meshes(**request.param)


def test_remote_call_gives_each_ranks_value(adverb_mesh):
    mesh = adverb_mesh
    with mesh.activate():
        got = whoami.call("t").get(timeout=60)
    assert isinstance(got, ValueMesh) and got.extent == {"gpu": 2}
    values = got.values()
    assert [v["point"] for v in values] == [{"gpu": 0}, {"gpu": 1}]
    assert [v["tag"] for v in values] == ["t", "t"]
    pids = [v["pid"] for v in values]
    assert len(set(pids)) == 2 and os.getpid() not in pids  # one process per rank
    if mesh._session.backend_kind == "c":
        tensor_workers = set(mesh._session._backend.pids())
        if mesh._session.tensor_worker == "python":
            # Beside the rank's tensor worker, in its process.
            assert set(pids) == tensor_workers
        else:
            # Native tensor workers run no Python: the rank's actor process.
            assert not set(pids) & tensor_workers
    # Keyword arguments, and the same processes at the next call.
    with mesh.activate():
        again = whoami.call(tag=7).get(timeout=60).values()
    assert [v["pid"] for v in again] == pids and [v["tag"] for v in again] == [7, 7]


def test_remote_adverbs_on_a_slice_reach_only_its_ranks(adverb_mesh, tmp_path):
    mesh = adverb_mesh
    with mesh.activate():
        pids = [v["pid"] for v in whoami.call().get(timeout=60).values()]
    with mesh.slice(gpu=1).activate():
        one = whoami.call().get(timeout=60)
        assert len(one) == 1 and one.values()[0]["pid"] == pids[1]
        assert one.values()[0]["point"] == {}  # its point in the slice called
        assert whoami.call_one().get(timeout=60)["pid"] == pids[1]
        assert whoami.choose().get(timeout=60)["pid"] == pids[1]
        assert [f.get(timeout=60)["pid"] for f in whoami.stream()] == [pids[1]]
        path = str(tmp_path / "notes.txt")
        assert note.broadcast(path, "broadcast") is None
        note.call_one(path, "called").get(timeout=60)  # after the broadcast (FIFO)
    assert open(path).read().splitlines() == ["{} broadcast", "{} called"]
    with mesh.slice(gpu=slice(0, 2)).activate():
        assert whoami.call().get(timeout=60).extent == {"gpu": 2}
    # A renamed view: value meshes and points in its names.
    with mesh.rename(gpu="tp").activate():
        renamed = whoami.call().get(timeout=60)
    assert renamed.extent == {"tp": 2}
    assert [v["point"] for v in renamed.values()] == [{"tp": 0}, {"tp": 1}]


def test_remote_stream_choose_and_accumulate_on_the_whole_mesh(adverb_mesh):
    from monarch.actor import Accumulator

    mesh = adverb_mesh
    with mesh.activate():
        pids = [v["pid"] for v in whoami.call().get(timeout=60).values()]
        futures = list(whoami.stream())
        assert sorted(f.get(timeout=60)["pid"] for f in futures) == sorted(pids)
        assert {whoami.choose().get(timeout=60)["pid"] for _ in range(4)} == set(pids)
        total = Accumulator(whoami, 0, lambda acc, v: acc + v["point"]["gpu"] + 1)
        assert total.accumulate().get(timeout=60) == 3


def test_remote_call_one_needs_a_mesh_of_one_rank(adverb_mesh):
    with adverb_mesh.activate():
        with pytest.raises(ValueError, match="call_one of remote function whoami .* 2 ranks.*"
                                             "exactly one"):
            whoami.call_one()


def test_remote_adverb_gets_the_ranks_local_shard(adverb_mesh, device):
    mesh = adverb_mesh
    with mesh.activate():
        t = torch.ones(2, device=device) * (mesh.rank("gpu") + 1)
        assert shard_of.call(t, scale=3).get(timeout=60).values() == [[3.0, 3.0], [6.0, 6.0]]
        # Results that are tensors come back as local ones, inside the mesh too.
        back = doubled.call(t).get(timeout=60).values()
        t.add_(10)  # in order with the tensor's stream: the next call sees it
        after = shard_of.call(t).get(timeout=60).values()
    assert all(type(v) is torch.Tensor for v in back)
    assert [v.tolist() for v in back] == [[2.0, 2.0], [4.0, 4.0]]
    assert after == [[11.0, 11.0], [12.0, 12.0]]
    with mesh.slice(gpu=1).activate():  # a slice: its rank's shard only
        assert shard_of.call_one(t).get(timeout=60) == [12.0, 12.0]


def test_send_a_remote_function_to_a_port(adverb_mesh):
    from monarch.actor import Channel, send

    mesh = adverb_mesh
    port, recv = Channel.open()
    with mesh.activate():
        assert send(whoami, args=(), kwargs={"tag": "sent"}, port=port) is None
    got = [recv.recv().get(timeout=60) for _ in range(2)]
    assert sorted(tuple(v["point"].items()) for v in got) == [(("gpu", 0),), (("gpu", 1),)]
    assert {v["tag"] for v in got} == {"sent"}
    ranked_port, ranked = Channel.open_ranked()
    with mesh.activate():
        send(whoami, (), {}, port=ranked_port, selection="choose")
        send(fails, (1,), {}, port=ranked_port)  # exceptions go to the port too
    values, errors = [], []
    for _ in range(3):  # one value and two exceptions, in the order they arrive
        fut = ranked.recv()
        error = fut.exception(timeout=60)
        (errors.append(error) if error is not None else values.append(fut.get()))
    (rank, value), = values
    assert value["point"] == {"gpu": rank}
    assert [str(e) for e in errors] == ["fails on purpose with 1"] * 2
    assert all(isinstance(e, ValueError) for e in errors)


def test_remote_adverb_exceptions_are_the_functions(adverb_mesh):
    from monarch.actor import ActorError

    with adverb_mesh.activate():
        with pytest.raises(ActorError, match="fails on purpose with 2") as info:
            fails.call(2).get(timeout=60)
        assert isinstance(info.value.exception, ValueError)
        # The ranks live on.
        assert len(whoami.call().get(timeout=60)) == 2


def test_a_failed_broadcast_does_not_fail_later_calls(adverb_mesh):
    """broadcast: an exception stops that rank's hidden actor (a supervision
    event, as for an actor endpoint); the next calls get fresh actors."""
    import time

    from monarch._src.actor.procs import existing_procs
    from monarch.actor import ActorError, SupervisionError

    mesh = adverb_mesh
    with mesh.activate():
        pids = [v["pid"] for v in whoami.call().get(timeout=60).values()]
        fails.broadcast(3)
        deadline = time.monotonic() + 30
        while True:
            try:
                got = whoami.call().get(timeout=60)
                break
            except (SupervisionError, ActorError):  # until the failure's event arrived
                assert time.monotonic() < deadline, "later calls keep failing"
                time.sleep(0.1)
    assert [v["pid"] for v in got.values()] == pids  # the same processes
    events = existing_procs(mesh).procs.events()
    assert any(m.startswith("__monarch_remote") and "fails on purpose with 3" in reason
               for m, _, reason in events), events


def test_remote_adverbs_by_value_and_by_path(adverb_mesh):
    from monarch.actor import ActorError

    offset = 5
    by_value = monarch.remote(lambda x: x + offset + current_rank()["gpu"])  # a closure
    assert by_value.name.startswith("python:@")
    relu = monarch.remote("torch.nn.functional.relu")  # imported by the workers
    missing = monarch.remote("no_such_package_here.fn")
    mesh = adverb_mesh
    with mesh.activate():
        assert by_value.call(1).get(timeout=60).values() == [6, 7]
        t = torch.ones(2) * (mesh.rank("gpu") * 2 - 1)  # -1 on gpu 0, 1 on gpu 1
        relus = relu.call(t).get(timeout=60).values()
        with pytest.raises(ActorError, match="no_such_package_here"):
            missing.call().get(timeout=60)
    assert [v.tolist() for v in relus] == [[0.0, 0.0], [1.0, 1.0]]


def test_remote_adverbs_need_an_active_mesh(meshes):
    from monarch.actor import Channel, send

    port, _ = Channel.open()
    adverbs = [lambda: whoami.call(), lambda: whoami.call_one(), lambda: whoami.choose(),
               lambda: whoami.stream(), lambda: whoami.broadcast(),
               lambda: send(whoami, (), {}, port=port)]
    for adverb in adverbs:
        with pytest.raises(ValueError, match="requires an active proc_mesh"):
            adverb()
    with meshes(backend="sim").activate():
        with monarch.no_mesh.activate():
            with pytest.raises(ValueError, match="requires an active proc_mesh"):
                whoami.call()


def test_remote_adverbs_inside_a_trace_are_refused():
    def program():
        mesh = this_host().spawn_procs({"gpu": 2}, backend="sim")
        with mesh.activate():
            whoami.call()

    with pytest.raises(NotImplementedError, match="inside monarch.trace"):
        monarch.trace(program)


def test_remote_adverb_refuses_a_tensor_of_other_processes(meshes):
    mesh = meshes(backend="sim")
    other = this_host().spawn_procs({"gpu": 2}, backend="sim")
    try:
        with other.activate():
            elsewhere = torch.ones(2)
        with mesh.activate():
            with pytest.raises(ValueError, match="other processes than the active mesh"):
                shard_of.call(elsewhere)
        with mesh.slice(gpu=1).activate():
            on_one = torch.ones(2)  # a tensor of rank 1 only
        with mesh.activate():
            with pytest.raises(ValueError, match="has no shard on ranks \\[0\\]"):
                shard_of.call(on_one)
    finally:
        other.stop()


def test_remote_adverbs_in_a_script_as_monarchs_getting_started(tmp_path):
    """Monarch's getting_started.py: a __main__ function (sent by value),
    call().get() and send() to a port, on the default backend. With native
    tensor workers it runs in the ranks' actor processes, which import no
    torch for it."""
    from conftest import run_script

    script = tmp_path / "getting_started_remote.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        from monarch import remote
        from monarch.actor import Channel, send, this_host

        trainer_procs = this_host().spawn_procs(per_host={"gpu": 4})

        @remote
        def check_memory():
            return (os.getpid(), "torch" in sys.modules)

        with trainer_procs.activate():
            values = check_memory.call().get().values()
        print("call", len({pid for pid, _ in values}), any(torch for _, torch in values))

        port, recv = Channel.open()
        with trainer_procs.activate():
            send(check_memory, args=(), kwargs={}, port=port)
        print("send", len({recv.recv().get() for _ in range(4)}))
        trainer_procs.stop()
    """))
    result = run_script(script, timeout=180)
    assert result.returncode == 0, result.stderr
    call, sent = result.stdout.split("\n")[-3:-1]
    assert sent == "send 4", result.stdout
    beside_tensor_workers = (os.environ.get("MONARCH_BACKEND") or "c") == "c" and \
        os.environ.get("MONARCH_TENSOR_WORKER_KIND") == "python"
    assert call == ("call 4 True" if beside_tensor_workers else "call 4 False"), result.stdout
