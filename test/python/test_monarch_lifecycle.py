"""Monarch's actor lifecycle and meshes as values (docs/python.md, "Actors":
"Lifecycle", "Meshes as values"): what Monarch's own programs rely on.

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest test/python/test_monarch_lifecycle.py

Actor classes are at module level (workers import them by module and name);
the script test at the end defines them in ``__main__`` as Monarch's
examples do. The proc meshes use the in-process tensor backend ("sim"):
actors live in their own worker processes either way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import textwrap
import threading
from typing import Any, List

import pytest

pytest.importorskip("monarch._actors")

import monarch.actor  # noqa: E402
from monarch.actor import (  # noqa: E402
    Actor,
    ActorError,
    Future,
    SupervisionError,
    endpoint,
    this_host,
)
from monarch._src.actor.actor_mesh import actor_pids  # noqa: E402
from conftest import run_script  # noqa: E402
from waiting import wait_until  # noqa: E402


class Failure(BaseException):
    """Not an Exception: raising it fails the actor (Monarch's rule)."""


class Counter(Actor):
    def __init__(self, v: int = 0):
        self.v = v

    @endpoint
    def incr(self) -> None:
        self.v += 1

    @endpoint
    def value(self) -> int:
        return self.v

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def fail_hard(self) -> None:
        raise Failure("failing on purpose")

    @endpoint
    def fail_soft(self) -> None:
        raise ValueError("an ordinary error")

    @endpoint
    def log_level(self) -> int:
        return logging.getLogger().level


class BadInit(Actor):
    def __init__(self, fail: bool = True):
        if fail:
            raise ValueError("no good constructor")

    @endpoint
    def ping(self) -> str:
        return "pong"


class ThreadBound(Actor):
    """Thread-local state set in __init__; endpoints read it."""

    def __init__(self):
        self.local = threading.local()
        self.local.count = 0
        self.ident = threading.get_ident()

    @endpoint
    def bump(self) -> List[int]:
        self.local.count += 1
        return [self.local.count, int(threading.get_ident() == self.ident)]

    @endpoint
    async def bump_async(self) -> List[int]:
        self.local.count += 1
        return [self.local.count, int(threading.get_ident() == self.ident)]


class Indirect(Actor):
    """Holds and uses meshes it was given."""

    def __init__(self, peer: Any = None):
        self.peer = peer

    @endpoint
    def set_peer(self, peer: Any) -> None:
        self.peer = peer

    @endpoint
    def peer_values(self) -> List[int]:
        return list(self.peer.value.call().get(timeout=30).values())

    @endpoint
    def peer_slice_value(self, gpu: int) -> int:
        return self.peer.slice(gpu=gpu).value.call_one().get(timeout=30)

    @endpoint
    def incr_peer_slice(self, gpu: int) -> None:
        self.peer.slice(gpu=gpu).incr.broadcast()

    @endpoint
    async def choose_value(self, counter: Any) -> int:
        return await counter.value.choose()

    @endpoint
    def call_endpoint(self, ep: Any) -> List[int]:
        return list(ep.call().get(timeout=30).values())

    @endpoint
    def echo(self, thing: Any) -> Any:
        return thing

    @endpoint
    def peer_fail_hard(self) -> str:
        try:
            self.peer.fail_hard.call_one().get(timeout=30)
        except SupervisionError as e:
            return f"SupervisionError: {e}"
        return "no error"


class Spawner(Actor):
    """Spawns on a proc mesh it was given and supervises what it spawned."""

    def __init__(self, procs: Any):
        self.children = procs.spawn("children", Counter, 7)
        self.events: List[str] = []

    @endpoint
    def children_mesh(self) -> Any:
        return self.children

    @endpoint
    def children_pids(self) -> List[int]:
        return list(self.children.pid.call().get(timeout=30).values())

    @endpoint
    def fail_child(self, gpu: int) -> str:
        try:
            self.children.slice(gpu=gpu).fail_hard.call_one().get(timeout=30)
        except SupervisionError:
            return "supervision error"
        return "no error"

    @endpoint
    def spawn_bad(self, procs: Any) -> None:
        self.bad = procs.spawn("bad_child", BadInit)

    @endpoint
    def seen(self) -> List[str]:
        return list(self.events)

    def __supervise__(self, event: Any) -> bool:
        self.events.append(str(event))
        return True


@pytest.fixture
def fault_events(monkeypatch):
    """Supervision events that reach the controller unhandled."""
    seen: List[Any] = []
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", seen.append)
    return seen


def _procs(**sizes: int) -> Any:
    return this_host().spawn_procs(sizes or {"gpu": 2}, backend="sim")


# -- stop ---------------------------------------------------------------------------

def test_proc_mesh_stop_returns_a_future_get_and_await():
    procs = _procs(gpu=2)
    counters = procs.spawn("counters", Counter, 1)
    assert counters.value.call().get(timeout=30).values() == [1, 1]
    stopped = procs.stop()
    assert isinstance(stopped, Future)
    assert stopped.get(timeout=30) is None
    with pytest.raises(SupervisionError):
        counters.value.call().get(timeout=30)
    with pytest.raises(RuntimeError, match="already been stopped"):
        procs.spawn("again", Counter)
    with pytest.raises(RuntimeError, match="cannot be passed on"):
        pickle.dumps(counters)

    async def main() -> None:
        other = _procs(gpu=1)
        other.spawn("c", Counter)
        assert await other.stop() is None
        assert await other.stop() is None  # a second stop does nothing

    asyncio.run(main())


def test_actor_mesh_stop_stops_only_that_mesh():
    procs = _procs(gpu=2)
    try:
        first = procs.spawn("first", Counter, 1)
        second = procs.spawn("second", Counter, 2)
        stopped = first.stop()
        assert isinstance(stopped, Future)
        assert stopped.get(timeout=30) is None
        with pytest.raises(SupervisionError, match="stopped"):
            first.value.call().get(timeout=30)
        with pytest.raises(SupervisionError):
            first.slice(gpu=1).value.call_one().get(timeout=30)
        assert second.value.call().get(timeout=30).values() == [2, 2]
        assert asyncio.run(_await(first.stop())) is None
        assert first.initialized.get(timeout=1) is None
    finally:
        procs.stop().get(timeout=30)


async def _await(future: Any) -> Any:
    return await future


def test_actor_mesh_stop_reaches_the_actors():
    """A stopped mesh's actors answer as stopped even to a handle that did
    not see the stop (a reference held by another actor)."""
    procs = _procs(gpu=2)
    try:
        counters = procs.spawn("counters", Counter)
        holder = procs.spawn("holder", Indirect, counters)
        assert holder.peer_values.call().get(timeout=30).values() == [[0, 0], [0, 0]]
        counters.stop().get(timeout=30)
        with pytest.raises(ActorError, match="stopped"):
            holder.peer_values.call().get(timeout=30)
    finally:
        procs.stop().get(timeout=30)


# -- spawn_procs() and logging_option ------------------------------------------------

def test_spawn_procs_without_shape_gives_one_proc_per_host():
    procs = this_host().spawn_procs(backend="sim")
    try:
        assert procs.sizes == {"hosts": 1}
        assert len(procs) == 1
        c = procs.spawn("one", Counter, 3)
        assert c.value.call_one().get(timeout=30) == 3
    finally:
        procs.stop().get(timeout=30)


def test_logging_option_sets_the_workers_log_level():
    procs = _procs(gpu=2)
    try:
        c = procs.slice(gpu=1).spawn("c", Counter)  # a slice: the level reaches all workers
        assert c.log_level.call().get(timeout=30).values() == [logging.WARNING]
        done = procs.logging_option(stream_to_client=True, aggregate_window_sec=None,
                                    level=logging.ERROR)
        assert isinstance(done, Future)
        done.get(timeout=30)
        assert c.log_level.call().get(timeout=30).values() == [logging.ERROR]
        later = procs.spawn("later", Counter)
        assert later.log_level.call().get(timeout=30).values() == [logging.ERROR] * 2
        assert asyncio.run(_await(procs.logging_option(stream_to_client=False))) is None
        with pytest.raises(ValueError):
            procs.logging_option(aggregate_window_sec=-1)
        with pytest.raises(TypeError):
            procs.logging_option(level="loud")
    finally:
        procs.stop().get(timeout=30)


# -- failures: constructors and BaseException ------------------------------------------

def test_constructor_error_returns_the_mesh_and_reports_each_rank(fault_events):
    procs = _procs(gpu=2)
    try:
        bad = procs.spawn("bad_init", BadInit)  # no error here
        wait_until(lambda: len(fault_events) >= 2, 15, "an event per rank")
        assert sorted(e.rank for e in fault_events) == [0, 1]
        for event in fault_events:
            assert event.mesh == "bad_init"
            assert "no good constructor" in str(event) and "bad_init" in str(event)
        with pytest.raises(SupervisionError, match="no good constructor"):
            bad.ping.call().get(timeout=30)
        with pytest.raises(SupervisionError):
            bad.slice(gpu=1).ping.call_one().get(timeout=30)
        good = procs.spawn("good_init", BadInit, fail=False)
        assert good.ping.call().get(timeout=30).values() == ["pong", "pong"]
    finally:
        procs.stop().get(timeout=30)


def test_constructor_error_goes_to_the_owning_actor(fault_events):
    procs = _procs(gpu=1)
    children = _procs(gpu=2)
    try:
        spawner = procs.spawn("spawner", Spawner, children)
        spawner.spawn_bad.call_one(children).get(timeout=30)
        seen = wait_until(lambda: len(spawner.seen.call_one().get(timeout=30)) >= 2 and
                          spawner.seen.call_one().get(timeout=30), 15, "the owner's events")
        assert all("no good constructor" in s and "bad_child" in s for s in seen)
        assert fault_events == []  # the owner handled them
    finally:
        procs.stop().get(timeout=30)
        children.stop().get(timeout=30)


def test_base_exception_fails_the_actor_with_a_supervision_error(fault_events):
    procs = _procs(gpu=2)
    try:
        c = procs.spawn("hard", Counter)
        other = procs.spawn("other", Counter, 4)
        with pytest.raises(ActorError, match="an ordinary error"):
            c.fail_soft.call().get(timeout=30)
        assert c.value.call().get(timeout=30).values() == [0, 0]  # an Exception: it lives
        with pytest.raises(SupervisionError, match="failing on purpose"):
            c.slice(gpu=1).fail_hard.call_one().get(timeout=30)
        wait_until(lambda: fault_events, 15, "the event at the controller")
        assert fault_events[0].mesh == "hard" and fault_events[0].rank == 1
        assert "failing on purpose" in fault_events[0].reason
        with pytest.raises(SupervisionError):
            c.value.call().get(timeout=30)  # the mesh includes the failed rank
        assert c.slice(gpu=0).value.call_one().get(timeout=30) == 0
        assert other.value.call().get(timeout=30).values() == [4, 4]
    finally:
        procs.stop().get(timeout=30)


# -- one thread per actor --------------------------------------------------------------

def test_constructor_and_endpoints_run_on_one_thread():
    procs = _procs(gpu=1)
    try:
        t = procs.spawn("tls", ThreadBound)
        replies = [t.bump.call_one().get(timeout=30) for _ in range(20)]
        replies += [t.bump_async.call_one().get(timeout=30) for _ in range(5)]
        # Casts while others are in flight reach the actor on other runtime
        # threads: the thread stays the actor's.
        futures = [t.bump.call_one() for _ in range(20)]
        replies += [f.get(timeout=30) for f in futures]
        assert [r[0] for r in replies] == list(range(1, 46))
        assert all(r[1] == 1 for r in replies)
    finally:
        procs.stop().get(timeout=30)


# -- meshes as values ------------------------------------------------------------------

def test_actor_mesh_passed_to_an_endpoint_calls_slices_and_choose():
    procs = _procs(gpu=2)
    try:
        counters = procs.spawn("counters", Counter, 3)
        holders = procs.spawn("holders", Indirect)
        holders.set_peer.call(counters).get(timeout=30)
        assert holders.peer_values.call().get(timeout=30).values() == [[3, 3], [3, 3]]
        holders.slice(gpu=0).incr_peer_slice.call_one(1).get(timeout=30)
        # broadcast from the actor, then a call from the controller: wait
        # for the increment to land.
        wait_until(lambda: counters.value.call().get(timeout=30).values() == [3, 4], 10,
                   "the actor's broadcast")
        assert holders.slice(gpu=1).peer_slice_value.call_one(1).get(timeout=30) == 4
        assert holders.choose_value.choose(counters.slice(gpu=1)).get(timeout=30) == 4
        assert holders.slice(gpu=0).call_endpoint.call_one(counters.value).get(timeout=30) \
            == [3, 4]
    finally:
        procs.stop().get(timeout=30)


def test_actor_mesh_on_another_proc_mesh_and_in_a_constructor():
    procs = _procs(gpu=1)
    others = _procs(gpu=2)
    try:
        counters = others.spawn("counters", Counter, 5)
        holder = procs.spawn("holder", Indirect, counters)
        assert holder.peer_values.call_one().get(timeout=30) == [5, 5]
        assert holder.peer_slice_value.call_one(0).get(timeout=30) == 5
    finally:
        procs.stop().get(timeout=30)
        others.stop().get(timeout=30)


def test_meshes_returned_from_actors_work_at_the_controller():
    procs = _procs(gpu=1)
    children = _procs(gpu=2)
    try:
        spawner = procs.spawn("spawner", Spawner, children)
        mesh = spawner.children_mesh.call_one().get(timeout=30)
        assert mesh.value.call().get(timeout=30).values() == [7, 7]
        mesh.slice(gpu=1).incr.broadcast()
        wait_until(lambda: mesh.slice(gpu=1).value.call_one().get(timeout=30) == 8, 10,
                   "the broadcast")
        # A mesh that goes out and comes back is the controller's own again.
        counters = children.spawn("counters", Counter, 1)
        back = procs.spawn("echo", Indirect).echo.call_one(counters).get(timeout=30)
        assert back._root is counters._root
        assert back.value.call().get(timeout=30).values() == [1, 1]
    finally:
        procs.stop().get(timeout=30)
        children.stop().get(timeout=30)


def test_proc_mesh_passed_to_an_actor_spawns_on_the_same_processes(fault_events):
    procs = _procs(gpu=1)
    children = _procs(gpu=2)
    try:
        spawner = procs.spawn("spawner", Spawner, children)
        mine = children.spawn("mine", Counter)
        assert spawner.children_pids.call_one().get(timeout=30) == \
            list(actor_pids(mine).values())
        # A failure of what the actor spawned goes to that actor, not here.
        assert spawner.fail_child.call_one(1).get(timeout=30) == "supervision error"
        seen = wait_until(lambda: spawner.seen.call_one().get(timeout=30), 15,
                          "the owner's event")
        assert "failing on purpose" in seen[0]
        assert fault_events == []
        assert mine.value.call().get(timeout=30).values() == [0, 0]
    finally:
        procs.stop().get(timeout=30)
        children.stop().get(timeout=30)


def test_proc_mesh_slice_passed_to_an_actor_spawns_on_that_slice():
    procs = _procs(gpu=1)
    children = _procs(gpu=3)
    try:
        mine = children.spawn("mine", Counter)
        pids = list(actor_pids(mine).values())
        spawner = procs.spawn("spawner", Spawner, children.slice(gpu=slice(1, 3)))
        assert spawner.children_pids.call_one().get(timeout=30) == pids[1:]
        mesh = spawner.children_mesh.call_one().get(timeout=30)
        assert mesh.sizes == {"gpu": 2}
        assert mesh.slice(gpu=1).pid.call_one().get(timeout=30) == pids[2]
    finally:
        procs.stop().get(timeout=30)
        children.stop().get(timeout=30)


def test_failures_of_a_passed_mesh_raise_at_the_holder_and_reach_the_owner(fault_events):
    procs = _procs(gpu=1)
    others = _procs(gpu=1)
    try:
        counters = others.spawn("counters", Counter)
        holder = procs.spawn("holder", Indirect, counters)
        reply = holder.peer_fail_hard.call_one().get(timeout=30)
        assert reply.startswith("SupervisionError") and "failing on purpose" in reply
        assert "exited because of the following reason" in reply  # Monarch's wording
        # The owner of 'counters' is the controller: the event comes here;
        # the holder (no __supervise__) did not get it, or it would have
        # failed and reported 'holder'.
        wait_until(lambda: fault_events, 15, "the owner's event")
        assert [e.mesh for e in fault_events] == ["counters"]
        assert holder.echo.call_one(1).get(timeout=30) == 1
        with pytest.raises(SupervisionError, match="exited because of the following reason"):
            counters.value.call_one().get(timeout=30)
    finally:
        procs.stop().get(timeout=30)
        others.stop().get(timeout=30)


# -- a Monarch program as its users write it ---------------------------------------------

_SCRIPT = textwrap.dedent('''
    import asyncio
    import threading

    from monarch.actor import Actor, endpoint, this_host


    class Ping(Actor):
        def __init__(self):
            self.local = threading.local()
            self.local.n = 0

        @endpoint
        def set_peer(self, peer):
            self.peer = peer

        @endpoint
        def ping(self, n):
            self.local.n += 1
            return n + 1

        @endpoint
        async def rally(self, n):
            return await self.peer.ping.call_one(n)

        @endpoint
        def count(self):
            return self.local.n


    procs = this_host().spawn_procs()
    ping = procs.spawn("ping", Ping)
    pong = procs.spawn("pong", Ping)
    ping.set_peer.call(pong).get()
    pong.set_peer.call(ping).get()
    total = 0
    for i in range(5):
        total = ping.rally.call_one(total).get()
        total = pong.rally.call_one(total).get()
    print("rallies", total, pong.count.call_one().get(), ping.count.call_one().get())


    async def finish():
        await ping.stop()
        await procs.stop()

    asyncio.run(finish())
    print("stopped")
''')


def test_monarch_style_script_runs(tmp_path):
    script = tmp_path / "ping_pong.py"
    script.write_text(_SCRIPT)
    out = run_script(script)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "rallies 10 5 5" in out.stdout
    assert "stopped" in out.stdout
    assert "monarch error" not in out.stderr and "Traceback" not in out.stderr, out.stderr


_SHUTDOWN_SCRIPT = textwrap.dedent('''
    import os

    from monarch.actor import Actor, endpoint, shutdown_context, this_host, this_proc


    class Pid(Actor):
        @endpoint
        def pid(self):
            return os.getpid()


    def gone(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] == "Z"  # ended, not yet reaped
        except FileNotFoundError:
            return True


    meshes = [this_host().spawn_procs({"gpu": 2}), this_host().spawn_procs({"gpu": 1})]
    actors = [m.spawn(f"a{i}", Pid) for i, m in enumerate(meshes)]
    actors.append(this_proc().spawn("mine", Pid))
    pids = [p for a in actors for p in a.pid.call().get().values()]
    print("running", sum(not gone(p) for p in pids), "of", len(pids))
    done = shutdown_context()
    print("result", done.get(timeout=60))
    import time
    deadline = time.monotonic() + 30
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("left", sum(not gone(p) for p in pids))
    print("again", shutdown_context().get(timeout=5))
    print("respawned", this_proc().spawn("later", Pid).pid.call_one().get() not in pids)
''')


def test_shutdown_context_ends_every_proc_the_program_started(tmp_path):
    """Monarch's shutdown_context(): a Future that completes once every proc
    mesh the program spawned (this_proc's too) has ended; a second call with
    nothing running completes at once; spawning works again after it."""
    script = tmp_path / "shutdown.py"
    script.write_text(_SHUTDOWN_SCRIPT)
    out = run_script(script)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "running 4 of 4" in out.stdout, out.stdout
    assert "result None" in out.stdout
    assert "left 0" in out.stdout, out.stdout
    assert "again None" in out.stdout
    assert "respawned True" in out.stdout
    assert "Traceback" not in out.stderr, out.stderr


# -- distributed tensors as endpoint arguments ------------------------------------------

class ShardReader(Actor):
    @endpoint
    def read(self, x: Any, scale: int = 1) -> Any:
        from monarch.actor import current_rank

        return [dict(current_rank()), (x * scale).tolist()]


@pytest.mark.parametrize("backend", ["sim", "c"])
def test_an_endpoint_called_with_a_distributed_tensor_gets_its_local_shard(backend):
    """Monarch: "each actor will receive the shard of the distributed tensor
    that is on the same process as the actor" -- with every adverb; a tensor
    of other processes is refused."""
    import torch

    from monarch import Tensor
    from monarch._src.tensor.session import backend_available

    if not backend_available(backend):
        pytest.skip(f"backend {backend} is not built")
    procs = this_host().spawn_procs({"host": 2, "gpu": 2}, backend=backend)
    other = this_host().spawn_procs({"gpu": 1}, backend=backend)
    try:
        readers = procs.spawn("readers", ShardReader)
        with procs.activate():
            t = torch.ones(2) * (procs.rank("host") * 10 + procs.rank("gpu"))
        assert isinstance(t, Tensor)
        got = readers.read.call(t, scale=2).get(timeout=30)
        assert got.values() == [[{"host": h, "gpu": g}, [2.0 * (10 * h + g)] * 2]
                                for h in range(2) for g in range(2)]
        # A slice keeps each actor's own shard; message_rank is its point there.
        row = readers.slice(host=1).read.call(t).get(timeout=30)
        assert row.values() == [[{"gpu": 0}, [10.0, 10.0]], [{"gpu": 1}, [11.0, 11.0]]]
        assert readers.slice(host=0, gpu=1).read.call_one(t).get(timeout=30) == [{}, [1.0, 1.0]]
        assert sorted(f.get(timeout=30)[1][0] for f in readers.read.stream(t)) == \
            [0.0, 1.0, 10.0, 11.0]
        assert readers.read.choose(t).get(timeout=30)[1][0] in (0.0, 1.0, 10.0, 11.0)
        # In order with the tensor's stream: a later in-place change is seen.
        with procs.activate():
            t.add_(100)
        assert readers.slice(host=1, gpu=1).read.call_one(t).get(timeout=30)[1] == [111.0] * 2
        with other.activate():
            elsewhere = torch.ones(1)
        with pytest.raises(ValueError, match="goes to actors on the processes it lives on"):
            readers.read.call(elsewhere)
    finally:
        procs.stop().get(timeout=30)
        other.stop().get(timeout=30)
