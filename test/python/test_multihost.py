"""Python tensors and actors on a mesh across hosts (docs/multi-host.md).

Runs under test/runtime/multihost/netns-hosts.sh (ctest runtime.MultiHostPython),
which starts one monarch-host agent per network namespace and exports their
addresses; skipped elsewhere.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from typing import Any, Tuple

import pytest
import torch

import monarch
from monarch import fetch_shard
from monarch._src.actor import actor_mesh as _actor_mesh
from monarch._src.tensor.session import backend_available
from monarch.actor import Actor, SupervisionError, attach_hosts, endpoint
from waiting import wait_until

pytestmark = [
    pytest.mark.skipif(
        not os.environ.get("MONARCH_TEST_HOSTS"),
        reason="needs host agents: run through test/runtime/multihost/netns-hosts.sh",
    ),
    pytest.mark.skipif(not backend_available("c"), reason="monarch._C is not built"),
]


def test_reduce_across_hosts_and_a_lost_host_is_named() -> None:
    addrs = os.environ["MONARCH_TEST_HOSTS"].split(",")
    hosts = attach_hosts(addrs, secret_file=os.environ["MONARCH_TEST_SECRET_FILE"])
    mesh = hosts.spawn_procs({"gpu": 2})
    assert mesh.sizes == {"hosts": len(addrs), "gpu": 2}
    n = 2 * len(addrs)
    with mesh.activate():
        r = mesh.rank(("hosts", "gpu")).to(torch.float32)
        total = (torch.ones(3) * r).reduce((), "sum")
        per_gpu = r.reduce("hosts", "sum")
    for h in range(len(addrs)):
        for g in range(2):
            assert torch.equal(fetch_shard(total, hosts=h, gpu=g).get(),
                               torch.full((3,), float(n * (n - 1) // 2)))
            # ranks g, 2+g, 4+g, ... of gpu g
            want = sum(2 * k + g for k in range(len(addrs)))
            assert fetch_shard(per_gpu, hosts=h, gpu=g).get().item() == want
    mesh.stop()


def test_bad_secret_file_is_a_clear_error(tmp_path) -> None:
    addrs = os.environ["MONARCH_TEST_HOSTS"].split(",")
    loose = tmp_path / "secret"
    loose.write_text("00" * 32 + "\n")
    loose.chmod(0o644)
    hosts = attach_hosts(addrs, secret_file=str(loose))
    with pytest.raises(RuntimeError, match=re.escape("chmod 600")):
        hosts.spawn_procs({"gpu": 1})


class Where(Actor):
    """Says where it runs and keeps a count."""

    def __init__(self, start: int):
        self.count = start

    @endpoint
    def where(self) -> Tuple[str, int]:
        # A network namespace per host (netns-hosts.sh): its inode names it.
        return os.readlink("/proc/self/ns/net"), os.getpid()

    @endpoint
    def incr(self, by: int) -> None:
        self.count += by

    @endpoint
    def get(self) -> int:
        return self.count

    @endpoint
    def say(self, text: str) -> None:
        print(text, flush=True)

    @endpoint
    def say_and_exit(self, lines: int) -> None:
        for i in range(lines):
            print(f"goodbye {os.getpid()} line {i}")
        sys.stdout.flush()
        os._exit(0)


def test_worker_output_before_its_exit_is_all_printed_when_stop_returns(capfd: Any) -> None:
    # An agent reports a proc's exit only after forwarding all its output,
    # and stopping a mesh waits for those reports: once stop() returns, every
    # line the workers wrote is in the controller's output, in order.
    addrs = os.environ["MONARCH_TEST_HOSTS"].split(",")
    hosts = attach_hosts(addrs, secret_file=os.environ["MONARCH_TEST_SECRET_FILE"])
    mesh = hosts.spawn_procs({"gpu": 1})
    try:
        a = mesh.spawn("leaving", Where, 0)
        pid = a.slice(hosts=1).where.call_one().get(timeout=30)[1]
        with pytest.raises(SupervisionError):
            a.slice(hosts=1).say_and_exit.call_one(300).get(timeout=15)
    finally:
        mesh.stop()
    out = capfd.readouterr().out
    lines = re.findall(rf"^\[procs\d+ rank 1 on [^\]]+\] goodbye {pid} line (\d+)$", out, re.M)
    assert [int(i) for i in lines] == list(range(300)), len(lines)


def test_python_actors_across_hosts(capfd: Any, monkeypatch: Any) -> None:
    import monarch.actor

    addrs = os.environ["MONARCH_TEST_HOSTS"].split(",")
    names = os.environ["MONARCH_TEST_HOST_NAMES"].split(",")
    agents = [int(p) for p in os.environ["MONARCH_TEST_AGENT_PIDS"].split(",")]
    assert len(addrs) == 2, "runs on 2 hosts"
    hosts = attach_hosts(addrs, secret_file=os.environ["MONARCH_TEST_SECRET_FILE"])
    mesh = hosts.spawn_procs({"gpu": 2})
    reached = []
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", reached.append)
    try:
        a = mesh.spawn("where", Where, 5)
        # call: each rank answers from its own host's namespace, not ours.
        places = a.where.call().get(timeout=30)
        assert places.sizes == {"hosts": 2, "gpu": 2}
        here = os.readlink("/proc/self/ns/net")
        netns = {h: {places.item(hosts=h, gpu=g)[0] for g in range(2)} for h in range(2)}
        assert all(len(v) == 1 for v in netns.values()), netns
        assert netns[0] != netns[1] and here not in netns[0] | netns[1]
        assert len({pid for _, pid in places.values()}) == 4
        # broadcast then call (per sender->actor FIFO), on a slice and the whole.
        assert a.slice(hosts=1).incr.broadcast(10) is None
        a.incr.broadcast(1)
        assert a.get.call().get(timeout=10).values() == [6, 6, 16, 16]
        assert a.slice(hosts=0, gpu=1).get.call_one().get(timeout=10) == 6
        # A worker's output reaches the controller's, prefixed with its rank
        # and host.
        a.slice(hosts=1, gpu=0).say.call_one("hello from the other host").get(timeout=10)
        out = []

        def printed():
            out.append(capfd.readouterr().out)
            return re.search(r"\[procs\d+ rank 2 on " + names[1] + r"\] hello from the other host",
                             "".join(out))

        wait_until(printed, 10, "the worker's line at the controller")
        # A host lost (its agent killed): the controller's fault hook hears
        # of it naming the host, calls touching it then fail naming it, the
        # other host keeps working.
        os.kill(agents[1], signal.SIGKILL)
        lost = f"host '{names[1]}'"
        event = wait_until(lambda: next((e for e in reached if lost in e.reason), None),
                            15, "the event at the controller's fault hook")
        assert event.rank in (2, 3), event
        assert {r for _, r, why in _actor_mesh.supervision_events(a) if lost in why} <= {2, 3}
        with pytest.raises(SupervisionError, match=f"host '{names[1]}'") as info:
            a.slice(hosts=1, gpu=1).get.call_one().get(timeout=15)
        assert (info.value.mesh, info.value.rank) == ("where", 3), str(info.value)
        with pytest.raises(SupervisionError, match=f"host '{names[1]}'"):
            a.get.call().get(timeout=15)
        assert a.slice(hosts=0).get.call().get(timeout=10).values() == [6, 6]
    finally:
        mesh.stop()

