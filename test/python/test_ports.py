"""Monarch's channels and ports (docs/python.md, "Channels and ports"):
``Channel.open()``, ``Port.send`` / ``exception`` from actors and from the
controller, ``send(endpoint, ..., port=, selection=)``, and endpoints declared
``explicit_response_port=True`` -- through the adverbs too, answering whenever
they like (deferred replies: the end of this file)."""

from __future__ import annotations

import asyncio
import os
import pickle
import queue
import signal
import textwrap
import threading
import time

import pytest

from conftest import run_script
from monarch.actor import (Actor, ActorError, Channel, Port, PortReceiver, RankedPortReceiver,
                           SupervisionError, current_rank, endpoint, send, this_host)
from waiting import wait_until

pytest.importorskip("monarch._actors")

from monarch._src.actor.actor_mesh import actor_pids, supervision_events  # noqa: E402


class Producer(Actor):
    def __init__(self, out: Port):
        self.out = out

    @endpoint
    def produce(self, n: int) -> None:
        for i in range(n):
            self.out.send(("item", i))
        self.out.send(None)

    @endpoint
    def square(self, x: int) -> int:
        if x < 0:
            raise ValueError(f"negative: {x}")
        return x * x

    @endpoint(explicit_response_port=True)
    def answer(self, port: Port, x: int) -> None:
        port.send(x + 100)

    @endpoint(explicit_response_port=True)
    def silent(self, port: Port) -> None:
        pass

    @endpoint
    def open_inbox(self) -> Port:
        """A channel whose receiver is in this actor: its port goes out."""
        self.inbox_port, self.inbox = Channel.open()
        return self.inbox_port

    @endpoint
    def read_inbox(self, n: int) -> list:
        return [self.inbox.recv().get(timeout=30) for _ in range(n)]


@pytest.fixture(scope="module")
def producers():
    out, received = Channel.open()
    procs = this_host().spawn_procs({"gpu": 2})
    mesh = procs.spawn("producers", Producer, out)
    yield mesh, received
    procs.stop()


def test_an_actor_sends_in_order_on_a_port_it_was_given(producers):
    mesh, received = producers
    mesh.slice(gpu=1).produce.broadcast(50)
    got = []
    while (item := received.recv().get(timeout=30)) is not None:
        got.append(item)
    assert got == [("item", i) for i in range(50)]


def test_recv_futures_take_messages_in_arrival_order():
    port, received = Channel.open()
    first, second = received.recv(), received.recv()
    assert not first.done()
    port.send("a")
    port.send("b")
    assert (second.get(timeout=10), first.get(timeout=10)) == ("b", "a")
    with pytest.raises(TimeoutError):
        received.recv().get(timeout=0.05)


def test_send_delivers_each_result_and_exception_to_the_port(producers):
    mesh, _ = producers
    port, received = Channel.open()
    send(mesh.square, (7,), {}, port=port)
    assert [received.recv().get(timeout=30) for _ in range(2)] == [49, 49]
    send(mesh.square, (-2,), {}, port=port, selection="choose")
    with pytest.raises(ValueError, match="negative: -2"):
        received.recv().get(timeout=30)
    # The actor lives on after an exception sent to a port.
    assert mesh.square.call(3).get(timeout=30).values() == [9, 9]


def test_a_ranked_receiver_says_which_actor_sent_each_message(producers):
    mesh, _ = producers
    port, received = Channel.open_ranked()
    assert isinstance(received, RankedPortReceiver)
    send(mesh.square, (5,), {}, port=port)
    assert sorted(received.recv().get(timeout=30) for _ in range(2)) == [(0, 25), (1, 25)]
    # An explicit_response_port endpoint sends on a port that knows its rank.
    send(mesh.answer, (1,), {}, port=port)
    assert sorted(received.recv().get(timeout=30) for _ in range(2)) == [(0, 101), (1, 101)]
    # An exception sent by an actor of rank r raises at the receiver.
    send(mesh.square, (-1,), {}, port=port, selection="choose")
    with pytest.raises(ValueError, match="negative: -1"):
        received.recv().get(timeout=30)
    # The channel's own port has no rank: its message cannot be ranked.
    port.send("from the controller")
    with pytest.raises(ValueError, match="without a rank"):
        received.recv().get(timeout=30)
    # PortReceiver.ranked() is the same view of a plain receiver.
    plain_port, plain = Channel.open()
    send(mesh.square, (2,), {}, port=plain_port, selection="choose")
    rank, value = plain.ranked().recv().get(timeout=30)
    assert rank in (0, 1) and value == 4


def test_send_choose_runs_on_one_actor(producers):
    mesh, _ = producers
    port, received = Channel.open()
    for x in range(4):
        send(mesh.square, (x,), {}, port=port, selection="choose")
    assert sorted(received.recv().get(timeout=30) for _ in range(4)) == [0, 1, 4, 9]
    with pytest.raises(TimeoutError):
        received.recv().get(timeout=0.2)  # four results, not eight


def test_explicit_response_port_through_adverbs_and_send(producers):
    mesh, _ = producers
    assert mesh.answer.call(1).get(timeout=30).values() == [101, 101]
    assert mesh.slice(gpu=0).answer.call_one(2).get(timeout=30) == 102
    port, received = Channel.open()
    send(mesh.answer, (5,), {}, port=port, selection="choose")
    assert received.recv().get(timeout=30) == 105
    with pytest.raises(Exception, match="returned without sending on its port"):
        mesh.slice(gpu=0).silent.call_one().get(timeout=30)


def test_a_port_of_an_actors_channel_reaches_it_from_the_controller(producers):
    mesh, _ = producers
    one = mesh.slice(gpu=0)
    inbox = one.open_inbox.call_one().get(timeout=30)
    assert isinstance(inbox, Port)
    for v in ["x", {"k": 1}, 3]:
        inbox.send(v)
    assert one.read_inbox.call_one(3).get(timeout=30) == ["x", {"k": 1}, 3]


def test_await_recv_and_a_once_port():
    port, received = Channel.open(once=True)

    async def main():
        port.send("only")
        port.send("dropped")
        return await received.recv()

    assert asyncio.run(main()) == "only"
    with pytest.raises(RuntimeError, match="once"):
        received.recv()


def test_ports_pickle_to_references_and_receivers_stay(producers):
    port, received = Channel.open()
    again = pickle.loads(pickle.dumps(port))
    again.send(42)
    assert received.recv().get(timeout=10) == 42
    with pytest.raises(TypeError, match="stays in the process"):
        pickle.dumps(received)
    received.close()
    with pytest.raises(RuntimeError, match="closed"):
        received.recv()
    assert isinstance(received, PortReceiver)


def test_bad_uses_are_clear_errors(producers):
    mesh, _ = producers
    port, _ = Channel.open()
    with pytest.raises(TypeError, match="endpoint of an actor mesh"):
        send(print, (), {}, port=port)
    with pytest.raises(TypeError, match="args is a tuple"):
        send(mesh.square, [1], {}, port=port)
    with pytest.raises(ValueError, match="'all' or 'choose'"):
        send(mesh.square, (1,), {}, port=port, selection="some")
    with pytest.raises(TypeError, match="a Port"):
        send(mesh.square, (1,), {}, port="nope")
    with pytest.raises(TypeError, match="takes an exception"):
        port.exception("not an exception")
    with pytest.raises(TypeError, match="Channel.open"):
        Port("", 1)


def test_a_script_with_channels_runs_as_a_user_runs_it(tmp_path):
    script = tmp_path / "pipeline.py"
    script.write_text(textwrap.dedent("""
        from monarch.actor import Actor, Channel, Port, endpoint, send, this_host

        class Doubler(Actor):
            @endpoint
            def double(self, x):
                return 2 * x

        port, recv = Channel.open()
        procs = this_host().spawn_procs(per_host={"gpus": 2})
        doublers = procs.spawn("doublers", Doubler)
        for x in range(6):
            send(doublers.double, (x,), {}, port=port, selection="choose")
        print(sorted(recv.recv().get() for _ in range(6)))
        procs.stop()
    """))
    result = run_script(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[0, 2, 4, 6, 8, 10]"


class Ticker(Actor):
    """Starts an asyncio task that outlives the endpoint (Monarch's pattern
    for background loops): it runs between the actor's messages."""

    def __init__(self, out: Port):
        self.out = out
        self.task = None
        self.ticks = 0

    @endpoint
    async def start(self) -> None:
        self.task = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            self.ticks += 1
            self.out.send(self.ticks)
            await asyncio.sleep(0.001)

    @endpoint
    def count(self) -> int:
        return self.ticks

    @endpoint
    async def stop_ticking(self) -> int:
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass
        return self.ticks


def test_asyncio_tasks_an_endpoint_started_run_between_messages():
    port, received = Channel.open()
    procs = this_host().spawn_procs({"gpu": 1})
    try:
        ticker = procs.spawn("ticker", Ticker, port)
        ticker.start.call_one().get(timeout=30)
        # The task ticks with no message to the actor in flight...
        assert [received.recv().get(timeout=30) for _ in range(20)] == list(range(1, 21))
        # ...and messages still get through while it runs.
        seen = ticker.count.call_one().get(timeout=30)
        assert seen >= 20
        stopped_at = ticker.stop_ticking.call_one().get(timeout=30)
        assert stopped_at >= seen
        assert ticker.count.call_one().get(timeout=30) == stopped_at  # cancelled: no more ticks
    finally:
        procs.stop()


# -- deferred replies: explicit_response_port endpoints through the adverbs --------------

class Stop(BaseException):
    """Not an Exception: raising it stops the actor (Monarch's rule)."""


class Deferred(Actor):
    """Keeps the ports of its ``hold`` calls and answers them later, when told,
    from a thread of its own -- after ``hold`` has returned."""

    def __init__(self):
        self.me = current_rank().rank  # in the spawned mesh
        self.held = {}
        self.calls = 0
        self.log = []
        self.todo = queue.Queue()
        threading.Thread(target=self._answer, daemon=True).start()

    @endpoint(explicit_response_port=True)
    def hold(self, port: Port, tag=None) -> None:
        self.held[self.calls] = port
        self.calls += 1
        self.log.append(("hold", tag))

    @endpoint
    def holding(self) -> list:
        return sorted(self.held)

    @endpoint
    def answer(self, n: int, value=None) -> None:
        """The n-th ``hold`` call (-1: the latest held) gets ``value`` (default:
        this actor's rank)."""
        port = self.held.pop(max(self.held) if n == -1 else n)
        self.todo.put((port, "send", self.me if value is None else value))

    @endpoint
    def fail(self, n: int, message: str) -> None:
        self.todo.put((self.held.pop(n), "exception", ValueError(message)))

    @endpoint
    def discard(self, n: int) -> None:
        self.held.pop(n)  # the last reference: dropped unanswered

    @endpoint(explicit_response_port=True)
    def relay(self, port: Port, other) -> None:
        """Passes its port on: the actors of ``other`` answer."""
        other.reply_on.broadcast(port, "relayed")

    @endpoint
    def reply_on(self, port: Port, value) -> None:
        port.send(value)

    @endpoint(explicit_response_port=True)
    def twice(self, port: Port) -> None:
        port.send("first")
        try:
            port.send("second")
        except RuntimeError as e:
            self.log.append(str(e))

    @endpoint
    def record(self, x) -> None:
        self.log.append(x)

    @endpoint
    def seen(self) -> list:
        return list(self.log)

    @endpoint
    def unanswered(self) -> int:
        """Reply ports of this actor's book (replies.py): bounded by those held."""
        book = self.__dict__.get("_monarch_replies")
        return 0 if book is None else len(book.tickets)

    @endpoint
    def stop_here(self) -> None:
        raise Stop("stopped on purpose")

    @endpoint
    def boom(self) -> None:
        raise ValueError("boom in a broadcast")

    def _answer(self) -> None:
        while True:
            port, how, value = self.todo.get()
            if how == "send":
                port.send(value)
            else:
                port.exception(value)
            del port


class Engine(Actor):
    """Monarch's getting_started.py "Responding Out of Order", its worker
    thread waiting for ``go()`` instead of sleeping."""

    def __init__(self):
        self.q = queue.Queue()
        self.new_weights = None
        self.go_on = threading.Event()
        threading.Thread(target=self.run, daemon=True).start()

    @endpoint
    def update_weights(self, new_weights) -> None:
        self.new_weights = new_weights

    @endpoint(explicit_response_port=True)
    def infer(self, port: Port[int]) -> None:
        self.q.put(port)

    @endpoint
    def go(self) -> None:
        self.go_on.set()

    def run(self) -> None:
        while True:
            request = self.q.get()
            self.go_on.wait()
            request.send(f"inferred with: {self.new_weights}")


@pytest.fixture(scope="module")
def deferred_procs():
    procs = this_host().spawn_procs({"gpu": 3})
    yield procs
    procs.stop()


@pytest.fixture
def quiet_faults(monkeypatch):
    """Supervision events that reach the controller unhandled (not printed)."""
    import monarch.actor

    seen = []
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", seen.append)
    return seen


def _held(one, n: int) -> None:
    """Waits until the actor's ``hold`` calls have run (a reply after theirs)."""
    assert len(one.holding.call_one().get(timeout=30)) == n


def test_getting_started_responding_out_of_order(deferred_procs):
    engine = deferred_procs.slice(gpu=0).spawn("engine", Engine)
    engine.update_weights.broadcast(0)
    first = engine.infer.call_one()
    second = engine.infer.call_one()
    engine.update_weights.broadcast(1)
    assert not first.done() and not second.done()
    engine.go.broadcast()
    assert first.get(timeout=30) == "inferred with: 1"
    assert second.get(timeout=30) == "inferred with: 1"
    # Through call, choose and stream on a mesh of several engines.
    engines = deferred_procs.spawn("engines", Engine)
    engines.update_weights.broadcast(2)
    engines.go.broadcast()
    assert engines.infer.call().get(timeout=30).values() == ["inferred with: 2"] * 3
    assert engines.infer.choose().get(timeout=30) == "inferred with: 2"
    assert [f.get(timeout=30) for f in engines.infer.stream()] == ["inferred with: 2"] * 3


def test_a_reply_sent_from_a_thread_after_the_endpoint_returned(deferred_procs):
    one = deferred_procs.slice(gpu=0).spawn("later", Deferred)
    fut = one.hold.call_one()
    _held(one, 1)  # hold returned: the actor serves other calls meanwhile
    assert not fut.done()
    with pytest.raises(TimeoutError):
        fut.get(timeout=0.05)
    one.answer.call_one(0, {"value": 7}).get(timeout=30)
    assert fut.get(timeout=30) == {"value": 7}
    assert fut.get() == {"value": 7}  # complete: again, at once
    assert one.unanswered.call_one().get(timeout=30) == 0


def test_replies_out_of_order_a_later_call_answered_first(deferred_procs):
    one = deferred_procs.slice(gpu=1).spawn("out_of_order", Deferred)
    first, second = one.hold.call_one("a"), one.hold.call_one("b")
    _held(one, 2)
    one.answer.call_one(1, "second").get(timeout=30)
    assert second.get(timeout=30) == "second"
    assert not first.done()
    one.answer.call_one(0, "first").get(timeout=30)
    assert first.get(timeout=30) == "first"


def test_call_collects_each_ranks_deferred_reply(deferred_procs):
    mesh = deferred_procs.spawn("per_rank", Deferred)
    fut = mesh.hold.call()
    assert mesh.holding.call().get(timeout=30).values() == [[0]] * 3
    for rank in (2, 1):  # answered in reverse rank order
        mesh.slice(gpu=rank).answer.call_one(0, f"rank {rank}").get(timeout=30)
    assert not fut.done()  # rank 0 has not answered
    mesh.slice(gpu=0).answer.call_one(0, "rank 0").get(timeout=30)
    assert fut.get(timeout=30).values() == ["rank 0", "rank 1", "rank 2"]
    # stream: in the order they are answered; choose: whichever actor it picks.
    futures = list(mesh.hold.stream())
    for rank in (1, 2, 0):
        mesh.slice(gpu=rank).answer.call_one(1).get(timeout=30)
        assert futures[[1, 2, 0].index(rank)].get(timeout=30) == rank
    chosen = mesh.hold.choose()
    held = mesh.holding.call().get(timeout=30).values()
    rank = next(r for r, h in enumerate(held) if h == [2])
    mesh.slice(gpu=rank).answer.call_one(2).get(timeout=30)
    assert chosen.get(timeout=30) == rank
    # A slice: the value mesh has the slice's shape.
    part = mesh.slice(gpu=slice(1, 3)).hold.call()
    mesh.slice(gpu=slice(1, 3)).answer.broadcast(-1)
    assert part.get(timeout=30).values() == [1, 2]


def test_an_exception_sent_through_the_port_fails_that_rank(deferred_procs):
    mesh = deferred_procs.spawn("raising", Deferred)
    fut = mesh.hold.call()
    one = mesh.slice(gpu=2).hold.call_one()
    mesh.slice(gpu=0).answer.broadcast(0)
    mesh.slice(gpu=1).fail.broadcast(0, "bad rank 1")
    with pytest.raises(ActorError, match="bad rank 1") as info:
        fut.get(timeout=30)
    assert isinstance(info.value.exception, ValueError) and "raising[1]" in str(info.value)
    mesh.slice(gpu=2).fail.broadcast(1, "bad rank 2")
    with pytest.raises(ActorError, match="bad rank 2"):
        one.get(timeout=30)
    # The actors live on.
    assert mesh.holding.call().get(timeout=30).values() == [[], [], [0]]


def test_a_port_dropped_or_sent_twice_and_one_passed_on(deferred_procs):
    mesh = deferred_procs.spawn("dropping", Deferred)
    one = mesh.slice(gpu=0)
    fut = one.hold.call_one()
    _held(one, 1)
    one.discard.broadcast(0)
    with pytest.raises(ActorError, match="dropped the port of its reply without sending"):
        fut.get(timeout=30)
    assert one.twice.call_one().get(timeout=30) == "first"
    assert any("takes one value" in entry for entry in one.seen.call_one().get(timeout=30)
               if isinstance(entry, str))
    # A port pickled to another actor is that actor's to answer.
    others = deferred_procs.slice(gpu=slice(1, 3)).spawn("relays", Deferred)
    assert one.relay.call_one(others.slice(gpu=1)).get(timeout=30) == "relayed"
    assert one.unanswered.call_one().get(timeout=30) == 0


def test_messages_to_an_actor_stay_in_order_around_deferred_calls(deferred_procs):
    one = deferred_procs.slice(gpu=2).spawn("ordered", Deferred)
    one.record.broadcast(1)
    fut = one.hold.call_one("x")
    one.record.broadcast(2)
    assert one.seen.call_one().get(timeout=30) == [1, ("hold", "x"), 2]
    one.answer.broadcast(0, "done")
    assert fut.get(timeout=30) == "done"


def test_a_dead_process_fails_the_pending_replies_of_its_actor(quiet_faults):
    procs = this_host().spawn_procs({"gpu": 2})
    try:
        mesh = procs.spawn("doomed", Deferred)
        all_ranks = mesh.hold.call()
        streamed = list(mesh.hold.stream())
        one = mesh.slice(gpu=1).hold.call_one()
        assert mesh.holding.call().get(timeout=30).values() == [[0, 1], [0, 1, 2]]
        mesh.slice(gpu=0).answer.broadcast(1, "alive")
        assert streamed[0].get(timeout=30) == "alive"
        pid = actor_pids(mesh)[1]
        start = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SupervisionError, match="killed by signal 9") as info:
            one.get(timeout=10)
        assert time.monotonic() - start < 2
        assert info.value.rank == 1
        with pytest.raises(SupervisionError):  # rank 0 never answered: it fails at once
            all_ranks.get(timeout=10)
        with pytest.raises(SupervisionError):
            streamed[1].get(timeout=10)
        with pytest.raises(SupervisionError):  # a new call to the dead rank
            mesh.slice(gpu=1).hold.call_one().get(timeout=10)
        assert mesh.slice(gpu=0).holding.call_one().get(timeout=10) == [0]
    finally:
        procs.stop()


def test_an_actor_stopped_by_a_base_exception_fails_its_pending_replies(quiet_faults):
    procs = this_host().spawn_procs({"gpu": 2})
    try:
        mesh = procs.spawn("stopping", Deferred)
        one = mesh.slice(gpu=0)
        fut = one.hold.call_one()
        _held(one, 1)
        start = time.monotonic()
        with pytest.raises(SupervisionError, match="stopped on purpose"):
            one.stop_here.call_one().get(timeout=30)
        with pytest.raises(SupervisionError, match="stopped on purpose"):
            fut.get(timeout=10)
        assert time.monotonic() - start < 2
        with pytest.raises(SupervisionError):
            one.hold.call_one().get(timeout=10)
        # A broadcast that raises stops its actor too.
        other = mesh.slice(gpu=1)
        pending = other.hold.call_one()
        _held(other, 1)
        other.boom.broadcast()
        with pytest.raises(SupervisionError, match="boom in a broadcast"):
            pending.get(timeout=10)
        wait_until(lambda: any(m == "stopping" and r == 1 for m, r, _ in
                               supervision_events(mesh)), 10, "the broadcast's event")
        with pytest.raises(SupervisionError):
            other.hold.call_one().get(timeout=10)
    finally:
        procs.stop()


def test_stopping_the_mesh_or_its_procs_fails_pending_replies():
    procs = this_host().spawn_procs({"gpu": 2})
    try:
        mesh = procs.spawn("stopped", Deferred)
        fut = mesh.hold.call()
        assert mesh.holding.call().get(timeout=30).values() == [[0], [0]]
        mesh.stop().get(timeout=30)
        with pytest.raises(SupervisionError, match="stopped"):
            fut.get(timeout=10)
        survivor = procs.spawn("survivor", Deferred)
        pending = survivor.slice(gpu=0).hold.call_one()
        _held(survivor.slice(gpu=0), 1)
    finally:
        procs.stop()
    with pytest.raises(SupervisionError, match="stopped"):
        pending.get(timeout=10)


def test_deferred_calls_bound_what_they_hold(deferred_procs):
    from monarch._src.actor import replies

    mesh = deferred_procs.spawn("bounded", Deferred)
    before = len(replies._live())
    fut = mesh.hold.call()
    assert len(replies._live()) == before + 1
    mesh.answer.broadcast(0)
    assert fut.get(timeout=30).values() == [0, 1, 2]
    assert len(replies._live()) == before  # answered: its channel is closed
    dropped = mesh.hold.call()
    assert len(replies._live()) == before + 1
    del dropped  # nobody waits any more: its channel closes with it
    assert len(replies._live()) == before
    assert mesh.unanswered.call().get(timeout=30).values() == [1, 1, 1]
    mesh.discard.broadcast(1)
    wait_until(lambda: mesh.unanswered.call().get(timeout=30).values() == [0, 0, 0], 10,
               "the dropped ports out of the actors' books")
