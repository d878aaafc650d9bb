"""Python actors on the C++ runtime (docs/python.md, "Actors").

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest test/python/test_actors.py

The proc meshes use the in-process tensor backend ("sim"): these tests are
about actors, which live in their own Python worker processes either way.
Actor classes are defined at module level so the workers import them by
module and name; this module does not import torch at the top so that workers
importing it stay fast.

Tests that pass tensors to actors or have actors make them take ``device``:
an actor allocates on it where its own process has a GPU (``_actor_device``),
else on the CPU.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time

import pytest

_actors = pytest.importorskip("monarch._actors")

from monarch._src.actor import actor_mesh as _actor_mesh  # noqa: E402
from monarch._src.common import pickling  # noqa: E402
from waiting import wait_until  # noqa: E402
from monarch.actor import (  # noqa: E402
    Actor,
    ActorError,
    Future,
    SupervisionError,
    ValueMesh,
    current_rank,
    current_size,
    endpoint,
    this_host,
)


# -- actors ----------------------------------------------------------------------

def _actor_device(device: str) -> str:
    """Where an actor allocates tensors asked for on ``device``: decided in
    its own process, the CPU where it has no GPU."""
    import torch

    return device if torch.cuda.is_available() else "cpu"


class Trainer(Actor):
    """The seed's example."""

    def __init__(self, lr: float = 0.1):
        self.lr = lr
        self.steps = []

    @endpoint
    def train(self, step: int):
        self.steps.append(step)
        return {"rank": current_rank(), "step": step, "lr": self.lr}


class Counter(Actor):
    def __init__(self, start: int = 0):
        self.value = start
        self.point = current_rank()
        self.size = current_size()

    @endpoint
    def incr(self, by: int = 1) -> None:
        self.value += by

    @endpoint
    def get(self) -> int:
        return self.value

    @endpoint
    def where(self):
        return self.point, self.size, os.getpid()

    @endpoint
    def slow(self, seconds: float) -> str:
        time.sleep(seconds)
        return "slept"

    @endpoint
    async def twice(self, x: int) -> int:
        await asyncio.sleep(0.01)
        return 2 * x

    @endpoint
    def fail(self, message: str):
        raise ValueError(message)

    @endpoint
    def exit(self, code: int):
        os._exit(code)

    @endpoint
    def echo(self, value):
        return value

    @endpoint
    def make(self, n: int, device: str):
        """A tensor made here, on ``device`` if this process has a GPU."""
        import torch

        rank = self.point["host"] * self.size["gpu"] + self.point["gpu"]
        return torch.arange(n, dtype=torch.float32, device=_actor_device(device)) + rank

    @endpoint
    def describe(self, t):
        """Where a tensor sent here lives in this process, and its sum."""
        return str(t.device), float(t.sum().item())


class BadInit(Actor):
    def __init__(self):
        raise RuntimeError("cannot construct")

    @endpoint
    def get(self):
        return None


class Owner(Actor):
    """Spawns a child actor mesh from an endpoint and owns it."""

    def __init__(self, handles: bool):
        self.handles = handles
        self.seen = []

    @endpoint
    def start(self, n: int):
        self.procs = this_host().spawn_procs({"gpu": n}, backend="sim")
        self.children = self.procs.spawn("children", Counter, 7)
        return self.children.get.call().get(timeout=10).values()

    @endpoint
    def kill_child(self, rank: int, code: int) -> None:
        self.children.slice(gpu=rank).exit.broadcast(code)

    @endpoint
    def fail_child(self, rank: int, message: str) -> None:
        self.children.slice(gpu=rank).fail.broadcast(message)

    @endpoint
    def seen_events(self):
        return [(e.mesh, e.rank, e.reason) for e in self.seen]

    @endpoint
    def child_value(self, rank: int) -> int:
        return self.children.slice(gpu=rank).get.call_one().get(timeout=5)

    def __supervise__(self, event) -> bool:
        self.seen.append(event)
        return self.handles


# -- fixtures --------------------------------------------------------------------

@pytest.fixture(scope="module")
def procs():
    mesh = this_host().spawn_procs({"host": 2, "gpu": 2}, backend="sim")
    yield mesh
    mesh.stop()


@pytest.fixture(scope="module")
def counters(procs):
    return procs.spawn("counters", Counter, 5)


# -- the seed example and the adverbs ----------------------------------------------

def test_trainer_seed_example(procs):
    trainers = procs.spawn("trainers", Trainer)
    result = trainers.train.call(step=0).get()
    assert isinstance(result, ValueMesh)
    assert len(result) == 4
    assert result.item(host=1, gpu=0) == {"rank": {"host": 1, "gpu": 0}, "step": 0, "lr": 0.1}
    assert [v["step"] for v in result.values()] == [0, 0, 0, 0]


def test_call_value_mesh_indexing(counters):
    vm = counters.where.call().get(timeout=10)
    assert vm.sizes == {"host": 2, "gpu": 2}
    points = [p for p, _ in vm.items()]
    assert points == [{"host": 0, "gpu": 0}, {"host": 0, "gpu": 1},
                      {"host": 1, "gpu": 0}, {"host": 1, "gpu": 1}]
    for point, (actor_point, size, _pid) in vm.items():
        assert actor_point == point
        assert size == {"host": 2, "gpu": 2}
    assert vm.item(host=0, gpu=1)[0] == {"host": 0, "gpu": 1}
    assert len({pid for _, _, pid in vm.values()}) == 4  # one process per rank
    with pytest.raises(KeyError):
        vm.item(host=0)  # gpu missing
    with pytest.raises(IndexError):
        vm.item(host=2, gpu=0)
    with pytest.raises(KeyError):
        vm.item(host=0, gpu=0, dp=0)


def test_slices(counters):
    row = counters.slice(host=1)
    assert row.sizes == {"gpu": 2}
    vm = row.where.call().get()
    assert [p for p, _, _ in vm.values()] == [{"host": 1, "gpu": 0}, {"host": 1, "gpu": 1}]
    col = counters.slice(gpu=1)  # strided in the root mesh
    assert [p for p, _, _ in col.where.call().get().values()] == [
        {"host": 0, "gpu": 1}, {"host": 1, "gpu": 1}]


def test_call_one_and_choose(counters):
    one = counters.slice(host=0, gpu=1)
    point, _, _ = one.where.call_one().get()
    assert point == {"host": 0, "gpu": 1}
    with pytest.raises(ValueError, match="exactly one"):
        counters.where.call_one()
    chosen = {counters.where.choose().get()[2] for _ in range(8)}
    assert len(chosen) >= 2  # round robin over live ranks


def test_broadcast_then_call(procs):
    c = procs.spawn("bcast", Counter, 0)
    assert c.incr.broadcast(by=3) is None
    c.slice(host=1).incr.broadcast(by=10)
    # Per sender->actor FIFO: the broadcasts are handled before this call.
    assert c.get.call().get().values() == [3, 3, 13, 13]


def test_rref_needs_worker_processes(counters):
    # The mesh's tensors are simulated in the controller: no worker holds
    # local shards to give these actors.
    with pytest.raises(NotImplementedError, match="'sim' backend has no worker processes"):
        counters.get.rref()


def test_stream(counters):
    futures = list(counters.twice.stream(21))  # one Future per actor, as in Monarch
    assert all(isinstance(f, Future) for f in futures)
    assert [f.get(timeout=10) for f in futures] == [42, 42, 42, 42]


def test_async_endpoint_and_await(counters):
    async def main():
        vm = await counters.twice.call(4)
        one = await counters.slice(host=0, gpu=0).twice.call_one(5)
        return vm.values(), one

    assert asyncio.run(main()) == ([8, 8, 8, 8], 10)


def test_get_timeout_leaves_call_pending(counters):
    fut = counters.slice(host=1, gpu=1).slow.call_one(0.5)
    with pytest.raises(TimeoutError):
        fut.get(timeout=0.05)
    assert fut.get(timeout=10) == "slept"


def test_pickled_arguments_and_results(counters):
    value = {"a": [1, 2.5, "x"], "b": (None, b"bytes"), "c": {3, 4}}
    assert counters.slice(host=0, gpu=0).echo.call_one(value).get() == value


def test_large_tensor_travels_as_raw_frame(counters):
    import torch

    t = torch.arange(256 * 1024, dtype=torch.float32).reshape(512, 512)
    frames = pickling.dumps((t,))
    assert len(frames) == 2 and len(frames[1]) == t.numel() * 4  # out of band
    assert len(frames[0]) < 1024
    back = counters.slice(host=0, gpu=0).echo.call_one(t).get(timeout=30)
    assert torch.equal(back, t)


def test_actors_make_and_take_tensors_on_the_device(counters, device):
    import torch

    from conftest import placed_on

    # Made in the actors: each on its process's device, and back here on it
    # (a CUDA tensor pickles with its device; this process has the same GPUs).
    made = counters.make.call(1000, device).get(timeout=30)
    for point, t in made.items():
        assert t.device.type == placed_on(device), (point, t.device)
        rank = point["host"] * 2 + point["gpu"]
        assert torch.equal(t.cpu(), torch.arange(1000, dtype=torch.float32) + rank)
    # Sent to an actor: it gets the tensor on that device, small and large
    # (CPU tensors of 64 KiB or more travel as raw frames, CUDA ones in the
    # pickle).
    one = counters.slice(host=1, gpu=0)
    for n in (6, 256 * 1024):
        x = torch.ones(n, device=_actor_device(device))
        where, total = one.describe.call_one(x).get(timeout=30)
        assert where.startswith(placed_on(device)) and total == float(n)
        back = one.echo.call_one(x).get(timeout=30)
        assert back.device.type == placed_on(device) and torch.equal(back, x)


# -- errors and supervision ----------------------------------------------------------

def test_endpoint_exception_raises_actor_error_and_actor_survives(counters):
    with pytest.raises(ActorError) as info:
        counters.fail.call("bad step").get()
    err = info.value
    assert isinstance(err.exception, ValueError)
    assert "bad step" in err.traceback
    assert "test_actors.py" in err.traceback and "in fail" in err.traceback
    assert "counters[" in str(err)
    assert counters.get.call().get().values() == [5, 5, 5, 5]


def test_constructor_error_is_a_supervision_error_at_the_calls(procs, monkeypatch):
    import monarch.actor

    reached = []
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", reached.append)
    bad = procs.spawn("bad_init", BadInit)  # Monarch's rule: spawn returns the mesh
    with pytest.raises(SupervisionError, match="cannot construct"):
        bad.slice(host=0, gpu=0).get.call_one().get(timeout=30)
    wait_until(lambda: len(reached) == 4, 15, "an event per rank")


def test_dead_process_raises_supervision_error_and_other_slices_work():
    procs = this_host().spawn_procs({"gpu": 3}, backend="sim")
    try:
        c = procs.spawn("sup", Counter, 1)
        start = time.monotonic()
        with pytest.raises(SupervisionError) as info:
            c.slice(gpu=1).exit.call(3).get(timeout=5)
        assert time.monotonic() - start < 1.0
        err = info.value
        assert err.mesh == "sup" and err.rank == 1
        assert "rank 1" in str(err) and "exited with code 3" in str(err)
        # The whole mesh includes the dead rank: fails at once.
        start = time.monotonic()
        with pytest.raises(SupervisionError, match="rank 1"):
            c.get.call().get(timeout=5)
        assert time.monotonic() - start < 1.0
        # Slices without it keep working.
        assert c.slice(gpu=0).get.call_one().get(timeout=5) == 1
        assert c.slice(gpu=slice(2, 3)).get.call().get(timeout=5).values() == [1]
        assert any(rank == 1 and "exited" in reason
                   for _, rank, reason in _actor_mesh.supervision_events(c))
    finally:
        procs.stop()


def test_killed_process_is_seen_within_a_second():
    import signal

    procs = this_host().spawn_procs({"gpu": 2}, backend="sim")
    try:
        c = procs.spawn("killed", Counter)
        fut = c.slice(gpu=0).slow.call_one(30)
        pid = _actor_mesh.actor_pids(c)[0]
        start = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SupervisionError, match="killed by signal 9"):
            fut.get(timeout=5)
        assert time.monotonic() - start < 1.0
        assert c.slice(gpu=1).get.call_one().get(timeout=5) == 0
    finally:
        procs.stop()


def test_broadcast_failure_stops_the_actor(procs):
    c = procs.spawn("bfail", Counter)
    c.slice(host=0, gpu=0).fail.broadcast("in broadcast")
    deadline = time.monotonic() + 5
    while not any(m == "bfail" for m, _, _ in _actor_mesh.supervision_events(c)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(SupervisionError, match="in broadcast"):
        c.slice(host=0, gpu=0).get.call_one().get(timeout=5)
    assert c.slice(host=1).get.call().get(timeout=5).values() == [0, 0]


def test_owner_supervise_handles_child_failures(procs):
    owner = procs.slice(host=0, gpu=0).spawn("owner_handles", Owner, True)
    assert owner.start.call_one(3).get(timeout=60) == [7, 7, 7]
    # A child process dies: the owner's __supervise__ sees it within a second.
    start = time.monotonic()
    owner.kill_child.call_one(1, 5).get(timeout=10)
    seen = wait_until(lambda: owner.seen_events.call_one().get(timeout=5), 5, "__supervise__")
    assert time.monotonic() - start < 1.0
    (mesh, rank, reason), = seen
    assert rank == 1 and "exited with code 5" in reason
    # Handled: the owner lives on and the slices without rank 1 keep working.
    assert owner.child_value.call_one(0).get(timeout=10) == 7
    assert owner.child_value.call_one(2).get(timeout=10) == 7
    with pytest.raises(ActorError, match="rank 1"):
        owner.child_value.call_one(1).get(timeout=10)
    # A child actor fails in a broadcast: an event of the child actor mesh.
    owner.fail_child.call_one(2, "child broke").get(timeout=10)
    seen = wait_until(lambda: (lambda s: s if len(s) == 2 else None)(
        owner.seen_events.call_one().get(timeout=5)), 5, "second event")
    assert seen[1][0] == "children" and seen[1][1] == 2 and "child broke" in seen[1][2]
    assert owner.child_value.call_one(0).get(timeout=10) == 7


def test_unhandled_child_failure_propagates_to_the_controller(procs, monkeypatch):
    import monarch.actor

    reached = []
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", reached.append)
    owner = procs.slice(host=1, gpu=1).spawn("owner_ignores", Owner, False)
    assert owner.start.call_one(2).get(timeout=60) == [7, 7]
    owner.kill_child.call_one(0, 9).get(timeout=10)
    event = wait_until(lambda: next((e for e in reached if e.mesh == "owner_ignores"), None),
                        5, "the escalated event at the controller")
    assert event.rank == 0  # the owner's rank in its own mesh
    assert "unhandled supervision: mesh" in event.reason and "exited with code 9" in event.reason
    # The owner failed: its calls raise a supervision error naming it.
    with pytest.raises(SupervisionError, match="owner_ignores") as info:
        owner.seen_events.call_one().get(timeout=5)
    assert info.value.mesh == "owner_ignores" and info.value.rank == 0
    # Other actors on the same procs are untouched.
    assert procs.slice(host=1, gpu=1).spawn("bystander", Counter, 3).get.call_one().get() == 3


def test_unhandled_event_at_the_controller_is_reported(procs, capfd):
    c = procs.spawn("reported", Counter)
    c.slice(host=1, gpu=0).fail.broadcast("nobody handles this")
    err = []

    def reported():
        err.append(capfd.readouterr().err)
        text = "".join(err)
        at = text.find("monarch: unhandled supervision event at the controller: "
                       "supervision: mesh 'reported' rank 2 failed:")
        return at >= 0 and "nobody handles this" in text[at:]

    # A condition, not a speed: generous for a loaded CI machine (it once
    # took over 5 s there under pytest -n).
    wait_until(reported, 30, "the report on stderr")
    with pytest.raises(SupervisionError, match="nobody handles this"):
        c.slice(host=1, gpu=0).get.call_one().get(timeout=5)


# -- an actor defined in the controller's __main__ ----------------------------------

def test_main_defined_actor(tmp_path):
    """A script as Monarch's examples write it -- classes and spawns at the top
    level, no __main__ guard: the classes (and a class local to a function)
    travel by value; the workers never run the script."""
    script = tmp_path / "main_actor.py"
    runs = tmp_path / "runs.txt"
    script.write_text(textwrap.dedent(f"""
        import os
        from monarch.actor import Actor, endpoint, this_host

        with open({str(runs)!r}, "a") as f:   # once per execution of this file
            f.write(f"{{os.getpid()}}\\n")

        class Greeter(Actor):
            def __init__(self, greeting):
                self.greeting = greeting

            @endpoint
            def greet(self, name):
                return f"{{self.greeting}}, {{name}}"

        class Parent(Actor):
            @endpoint
            def children_greet(self, name):
                # an actor spawning actors of the script's classes
                self.procs = this_host().spawn_procs({{"gpu": 1}}, backend="sim")
                kids = self.procs.spawn("kids", Greeter, "hi")
                return kids.greet.call_one(name).get()

        def make_local_class():
            class Local(Actor):
                @endpoint
                def twice(self, x):
                    return [x, x]
            return Local

        procs = this_host().spawn_procs({{"gpu": 2}}, backend="sim")
        greeters = procs.spawn("greeters", Greeter, "hello")
        print(greeters.greet.call("world").get().values())
        parent = procs.slice(gpu=0).spawn("parent", Parent)
        print(parent.children_greet.call_one("kid").get())
        local = procs.spawn("local", make_local_class())
        print(local.slice(gpu=1).twice.call_one(3).get())
        print("sent back", greeters.slice(gpu=0).greet.call_one(Greeter).get().startswith("hello"))
        procs.stop()
    """))
    env = dict(os.environ)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "['hello, world', 'hello, world']" in out.stdout
    assert "hi, kid" in out.stdout
    assert "[3, 3]" in out.stdout
    assert "sent back True" in out.stdout
    # Only the controller ran the script: no worker re-ran its top level.
    assert len(runs.read_text().split()) == 1, runs.read_text()
