"""Monarch's channels and ports (docs/python.md, "Channels and ports"):
``Channel.open()``, ``Port.send`` / ``exception`` from actors and from the
controller, ``send(endpoint, ..., port=, selection=)``, and endpoints declared
``explicit_response_port=True``."""

from __future__ import annotations

import asyncio
import pickle
import textwrap

import pytest

from conftest import run_script
from monarch.actor import (Actor, Channel, Port, PortReceiver, RankedPortReceiver, endpoint, send,
                           this_host)

pytest.importorskip("monarch._actors")


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
