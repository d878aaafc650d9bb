"""Monarch's program-wide names (docs/python.md, "Singleton controllers" and
"Lifecycle"): ``get_or_spawn_controller`` -- one actor per name, from the
controller and from actors at any depth -- and ``shutdown_context`` (run as
a script: it stops every mesh of the process, the test session's too)."""

from __future__ import annotations

import os
import textwrap

import pytest

from conftest import run_script
from monarch.actor import Actor, Future, endpoint, get_or_spawn_controller, this_host
from waiting import wait_until

pytest.importorskip("monarch._actors")


class Registry(Actor):
    """A singleton: counts what it is told, says where it runs."""

    def __init__(self, start: int = 0):
        self.count = start

    @endpoint
    def add(self, n: int) -> int:
        self.count += n
        return self.count

    @endpoint
    def pid(self) -> int:
        return os.getpid()


class Asker(Actor):
    """Asks for singletons from inside an actor."""

    @endpoint
    def add_to(self, name: str, start: int, n: int) -> tuple:
        registry = get_or_spawn_controller(name, Registry, start).get(timeout=60)
        return registry.add.call_one(n).get(timeout=60), registry.pid.call_one().get(timeout=60)

    @endpoint
    def spawn_child_asker(self) -> None:
        self.child_procs = this_host().spawn_procs({"gpu": 1})
        self.child = self.child_procs.spawn("child_asker", Asker)

    @endpoint
    def child_add_to(self, name: str, start: int, n: int) -> tuple:
        return self.child.add_to.call_one(name, start, n).get(timeout=60)


class Broken(Actor):
    def __init__(self) -> None:
        raise RuntimeError("this controller does not start")


@pytest.fixture(scope="module")
def askers():
    procs = this_host().spawn_procs({"gpu": 2})
    yield procs.spawn("askers", Asker)
    procs.stop()


def test_the_controller_gets_one_actor_per_name():
    fut = get_or_spawn_controller("singletons-a", Registry, 5)
    assert isinstance(fut, Future)
    first = fut.get(timeout=60)
    assert first.add.call_one(1).get(timeout=30) == 6
    again = get_or_spawn_controller("singletons-a", Registry, 1000).get(timeout=60)
    assert again is first  # later arguments are not used
    assert again.add.call_one(1).get(timeout=30) == 7
    other = get_or_spawn_controller("singletons-b", Registry).get(timeout=60)
    assert other.add.call_one(0).get(timeout=30) == 0
    # Both live on the controller's this_proc(), as in Monarch.
    from monarch.actor import this_proc

    assert other.pid.call_one().get(timeout=30) == first.pid.call_one().get(timeout=30)
    assert this_proc().spawn("probe-pid", Registry).pid.call_one().get(timeout=30) == \
        first.pid.call_one().get(timeout=30)


def test_actors_get_the_controllers_singleton(askers):
    mine = get_or_spawn_controller("singletons-c", Registry, 10).get(timeout=60)
    pid = mine.pid.call_one().get(timeout=30)
    results = askers.add_to.call("singletons-c", 99, 1).get(timeout=120).values()
    assert sorted(results) == [(11, pid), (12, pid)]  # one counter, both actors
    assert mine.add.call_one(0).get(timeout=30) == 12


def test_a_singleton_an_actor_spawned_first_is_the_controllers_too(askers):
    one = askers.slice(gpu=0)
    assert one.add_to.call_one("singletons-d", 100, 1).get(timeout=120)[0] == 101
    # The other actor, then the controller, get that one (its start of 100).
    assert askers.slice(gpu=1).add_to.call_one("singletons-d", 0, 1).get(timeout=120)[0] == 102
    mine = get_or_spawn_controller("singletons-d", Registry, 0).get(timeout=60)
    assert mine.add.call_one(1).get(timeout=30) == 103


def test_an_actor_spawned_by_an_actor_reaches_the_same_singleton(askers):
    mine = get_or_spawn_controller("singletons-e", Registry, 0).get(timeout=60)
    one = askers.slice(gpu=0)
    one.spawn_child_asker.call_one().get(timeout=120)
    count, pid = one.child_add_to.call_one("singletons-e", 50, 3).get(timeout=120)
    assert (count, pid) == (3, mine.pid.call_one().get(timeout=30))


def test_get_or_spawn_controller_checks_its_arguments():
    with pytest.raises(TypeError, match="Actor subclass"):
        get_or_spawn_controller("singletons-f", object)
    with pytest.raises(TypeError, match="name"):
        get_or_spawn_controller("", Registry)
    # A name the runtime refuses fails the Future, and is not registered.
    with pytest.raises(ValueError, match="may not hold"):
        get_or_spawn_controller("bad name", Registry).get(timeout=60)
    assert get_or_spawn_controller("bad_name", Registry).get(timeout=60) is not None


def test_a_failed_controller_is_reported_at_the_next_call(capfd):
    # The spawn returns the mesh (a constructor that raises is a supervision
    # event, Monarch's rule); the event may already have arrived here.
    first = get_or_spawn_controller("singletons-broken", Broken).exception(timeout=60)
    assert first is None or isinstance(first, ValueError)

    def failure():
        try:
            get_or_spawn_controller("singletons-broken", Broken).get(timeout=60)
        except ValueError as e:
            return str(e)
        return None

    message = wait_until(failure, timeout=30, what="the controller's failure")
    assert message.startswith("Failure on singletons-broken: ")
    assert "this controller does not start" in message


def test_shutdown_context_stops_every_process_of_the_program(tmp_path):
    script = tmp_path / "shutdown.py"
    script.write_text(textwrap.dedent("""
        import os, time
        from monarch.actor import (Actor, Future, SupervisionError, endpoint,
                                   get_or_spawn_controller, hosts_from_config,
                                   shutdown_context, this_host, this_proc)

        def descendants():
            # Live (not zombie) processes below this one.
            children = {}
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open(f"/proc/{entry}/stat") as f:
                            stat = f.read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    if stat[0] not in ("Z", "X"):
                        children.setdefault(int(stat[1]), []).append(int(entry))
            out, todo = [], [os.getpid()]
            while todo:
                for child in children.get(todo.pop(), []):
                    out.append(child)
                    todo.append(child)
            return out

        def wait_for_none(timeout):
            deadline = time.monotonic() + timeout
            while descendants() and time.monotonic() < deadline:
                time.sleep(0.02)
            return descendants()

        class Counter(Actor):
            def __init__(self):
                self.n = 0

            @endpoint
            def incr(self):
                self.n += 1
                return self.n

        hosts = hosts_from_config("MONARCH_HOSTS")        # two local agents
        remote = hosts.spawn_procs(per_host={"gpus": 1})
        print("remote", remote.spawn("rc", Counter).incr.call().get().values())
        procs = this_host().spawn_procs({"gpu": 2})
        counters = procs.spawn("counters", Counter)
        print("local", counters.incr.call().get().values())
        print("this_proc", this_proc().spawn("single", Counter).incr.call_one().get())
        ctl = get_or_spawn_controller("ctl", Counter).get()
        print("ctl", ctl.incr.call_one().get(), ctl.incr.call_one().get())
        print("running", len(descendants()))
        fut = shutdown_context()
        print("future", isinstance(fut, Future), fut.done(), fut.get())
        print("left", wait_for_none(30))
        try:
            counters.incr.call().get(timeout=10)
        except SupervisionError:
            print("counters stopped")
        print("again", shutdown_context().get())
        print("fresh_ctl", get_or_spawn_controller("ctl", Counter).get().incr.call_one().get())
        shutdown_context().get()
        print("left", wait_for_none(30))
    """))
    saved = os.environ.pop("MONARCH_HOSTS", None)
    try:
        result = run_script(script, timeout=240)
    finally:
        if saved is not None:
            os.environ["MONARCH_HOSTS"] = saved
    assert result.returncode == 0, result.stderr
    out = dict(line.split(" ", 1) for line in result.stdout.strip().splitlines()
               if " " in line)
    assert out["remote"] == "[1, 1]" and out["local"] == "[1, 1]" and out["ctl"] == "1 2"
    # 2 agents + their 2 actor workers (+ tensor workers), 2 local procs, this_proc.
    assert int(out["running"]) >= 7, result.stdout
    assert out["future"] == "True True None"
    assert result.stdout.count("left []") == 2, result.stdout
    assert "counters stopped" in result.stdout
    assert out["again"] == "None" and out["fresh_ctl"] == "1"
    assert "Traceback" not in result.stderr, result.stderr
