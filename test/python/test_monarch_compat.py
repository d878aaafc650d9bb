"""Monarch's API as Monarch defines it (docs/python.md, "Monarch compatibility"):
``Point`` and ``Extent``, ``context()`` and the ``current_*`` functions,
``ValueMesh`` as a mesh, ``stream`` yielding futures, ``Accumulator``,
``as_endpoint``, ``concurrent_endpoint``, ``monarch.config``,
``get_active_mesh`` / ``no_mesh``, and programs written the way Monarch's
docs write them (top-level code, no ``__main__`` guard)."""

from __future__ import annotations

import asyncio
import operator
import os
import pickle
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import run_script
from monarch._src.tensor.session import backend_available
from monarch._src.actor.shape import DimensionError, Extent, Point
from monarch._src.actor.value_mesh import ValueMesh
from monarch.actor import (
    Accumulator,
    Actor,
    Future,
    as_endpoint,
    concurrent_endpoint,
    context,
    current_actor_name,
    current_rank,
    current_size,
    endpoint,
    this_host,
)

try:
    import monarch._actors  # noqa: F401
except ImportError:  # the extension is not built
    HAVE_ACTORS = False
else:
    HAVE_ACTORS = True

#: Tests that spawn actors need the actor extension (monarch._actors).
needs_actors = pytest.mark.skipif(not HAVE_ACTORS, reason="monarch._actors is not built")

_HERE = os.path.dirname(os.path.abspath(__file__))


# -- Extent and Point --------------------------------------------------------------

def test_extent_is_a_mapping_of_sizes():
    e = Extent(["host", "gpu"], [2, 4])
    assert e["gpu"] == 4 and e.labels == ["host", "gpu"] and e.sizes == [2, 4]
    assert dict(e) == {"host": 2, "gpu": 4} and list(e) == ["host", "gpu"] and len(e) == 2
    assert e.nelements == 8 and Extent([], []).nelements == 1
    assert "gpu" in e and "dp" not in e and e.get("dp") is None
    assert e == Extent(["host", "gpu"], [2, 4]) and e != Extent(["gpu", "host"], [4, 2])
    assert hash(e) == hash(Extent(["host", "gpu"], [2, 4]))
    assert str(e) == "{host: 2, gpu: 4}"
    assert pickle.loads(pickle.dumps(e)) == e
    with pytest.raises(ValueError):
        e["dp"]  # Monarch's error type
    with pytest.raises(ValueError, match="one size per label"):
        Extent(["a"], [1, 2])
    with pytest.raises(ValueError, match="distinct"):
        Extent(["a", "a"], [1, 2])


def test_point_is_a_rank_of_an_extent():
    e = Extent(["label0", "label1"], [3, 4])
    p = Point(6, e)
    assert p.rank == 6 and p.extent == e
    assert p["label0"] == 1 and p["label1"] == 2 and p.size("label1") == 4
    assert dict(p) == {"label0": 1, "label1": 2} and len(p) == 2 and list(p) == ["label0", "label1"]
    # Row-major, printed as Monarch prints it.
    assert str(Point(0, e)) == "{'label0': 0/3, 'label1': 0/4}"
    assert str(Point(3, e)) == "{'label0': 0/3, 'label1': 3/4}"
    assert str(Point(11, e)) == "{'label0': 2/3, 'label1': 3/4}"
    assert [q.rank for q in e.points()] == list(range(12))
    with pytest.raises(IndexError):
        Point(12, e)
    with pytest.raises(KeyError):
        p["dp"]
    with pytest.raises(ValueError):
        p["dp"]
    assert issubclass(DimensionError, KeyError) and issubclass(DimensionError, ValueError)


def test_point_compares_like_a_point_and_like_a_dict():
    e = Extent(["host", "gpu"], [2, 2])
    p = Point(3, e)
    assert p == Point(3, Extent(["host", "gpu"], [2, 2]))
    assert p != Point(2, e)
    assert p != Point(1, Extent(["host", "gpu"], [1, 2]))  # same coordinates, other extent
    assert p == {"host": 1, "gpu": 1} and p != {"host": 1, "gpu": 0} and p != {"host": 1}
    assert {p: "x"}[Point(3, e)] == "x"  # hashable
    assert pickle.loads(pickle.dumps(p)) == p
    assert Point.of({"gpu": 1, "host": 0}, {"host": 2, "gpu": 2}).rank == 1
    with pytest.raises(ValueError):
        Point.of({"gpu": 1}, {"host": 2, "gpu": 2})


def _mesh(value, **kwargs):
    return kwargs, value


def test_point_spreads_into_slice_keywords():
    p = Point(5, Extent(["host", "gpu"], [2, 4]))
    assert _mesh(0, **p)[0] == {"host": 1, "gpu": 1}


# -- ValueMesh as a mesh ---------------------------------------------------------------

def _vm() -> ValueMesh:
    return ValueMesh(["host", "gpu"], [2, 3], [f"v{i}" for i in range(6)])


def test_value_mesh_items_are_points():
    vm = _vm()
    items = vm.items()
    assert [type(p) for p, _ in items] == [Point] * 6
    assert [p.rank for p, _ in items] == list(range(6))
    assert items[4][0] == {"host": 1, "gpu": 1} and items[4][1] == "v4"
    assert items[4][0].extent == Extent(["host", "gpu"], [2, 3]) == vm.extent
    assert list(vm) == items and vm.get(4) == "v4" and len(vm) == 6


def test_value_mesh_slice_drops_or_keeps_dimensions():
    vm = _vm()
    row = vm.slice(host=1)  # an int removes the dimension
    assert row.sizes == {"gpu": 3} and row.values() == ["v3", "v4", "v5"]
    assert [str(p) for p, _ in row.items()] == ["{'gpu': 0/3}", "{'gpu': 1/3}", "{'gpu': 2/3}"]
    assert row.item(gpu=2) == "v5"
    cols = vm.slice(gpu=slice(1, 3))  # a slice keeps it
    assert cols.sizes == {"host": 2, "gpu": 2}
    assert cols.values() == ["v1", "v2", "v4", "v5"] and cols.item(host=1, gpu=0) == "v4"
    one = vm.slice(host=0, gpu=2)
    assert one.sizes == {} and one.item() == "v2" and len(one) == 1
    with pytest.raises(KeyError):
        vm.slice(dp=0)
    with pytest.raises(IndexError):
        vm.slice(host=2)


def test_value_mesh_flatten():
    flat = _vm().flatten("r")
    assert flat.sizes == {"r": 6} and flat.values() == [f"v{i}" for i in range(6)]
    assert flat.slice(r=4).item() == "v4" and flat.item(r=5) == "v5"
    assert [p.rank for p, _ in flat.items()] == list(range(6))
    sliced = _vm().slice(host=1).flatten("x")  # a dense slice flattens
    assert sliced.values() == ["v3", "v4", "v5"]
    with pytest.raises(ValueError, match="contiguous"):
        _vm().slice(gpu=1).flatten("x")  # strided: not dense, as in Monarch


def test_value_mesh_pickles_as_its_view():
    vm = pickle.loads(pickle.dumps(_vm().slice(gpu=slice(0, 2))))
    assert vm.sizes == {"host": 2, "gpu": 2} and vm.values() == ["v0", "v1", "v3", "v4"]
    with pytest.raises(ValueError, match="needs 6 values"):
        ValueMesh(["host", "gpu"], [2, 3], [1, 2])


# -- the running actor, from its context ------------------------------------------------

class _Sample:
    pass


def test_context_reads_the_workers_context():
    from monarch._src.actor import context as actor_context

    info = {"mesh": "trainers", "rank": 3, "point": {"host": 1, "gpu": 1},
            "sizes": {"host": 2, "gpu": 2}, "proc_rank": 7}
    with actor_context.entered(_Sample(), info):
        ctx = context()
        assert ctx.actor_instance.rank == Point(3, Extent(["host", "gpu"], [2, 2]))
        assert ctx.message_rank == ctx.actor_instance.rank == current_rank()
        assert current_size() == {"host": 2, "gpu": 2}
        assert ctx.actor_instance.name == "trainers"
        assert ctx.actor_instance.class_name == f"{__name__}._Sample"
        assert current_actor_name() == "proc[7]/trainers[3]"
        assert repr(ctx.actor_instance) == \
            f"<{__name__}._Sample trainers{{'host': 1/2, 'gpu': 1/2}}>"
        with pytest.raises(NotImplementedError, match="pass the ProcMesh"):
            ctx.actor_instance.proc
    # Where the context says which slice the message went to, that is the
    # message rank (and current_rank(), as in Monarch); the actor keeps its own.
    sliced = dict(info, message={"point": {"gpu": 1}, "sizes": {"gpu": 2}})
    with actor_context.entered(_Sample(), sliced):
        assert current_rank() == Point(1, Extent(["gpu"], [2])) == context().message_rank
        assert current_size() == {"gpu": 2}
        assert context().actor_instance.rank == {"host": 1, "gpu": 1}
    assert len(current_rank()) == 0  # back in the controller


# -- monarch.config --------------------------------------------------------------------

def test_configure_sets_the_runtime_variable_and_clear_undoes_it(monkeypatch):
    import monarch.config as config

    monkeypatch.setenv("MONARCH_HEARTBEAT_MS", "700")
    monkeypatch.delenv("MONARCH_LOG", raising=False)
    config.clear_runtime_config()
    try:
        config.configure(heartbeat_interval_ms="2s", log_level="debug")
        assert os.environ["MONARCH_HEARTBEAT_MS"] == "2000"
        assert os.environ["MONARCH_LOG"] == "debug"
        assert config.get_runtime_config() == {"heartbeat_interval_ms": 2000,
                                               "log_level": "debug"}
        assert config.get_global_config()["heartbeat_interval_ms"] == 2000
    finally:
        config.clear_runtime_config()
    assert os.environ["MONARCH_HEARTBEAT_MS"] == "700" and "MONARCH_LOG" not in os.environ
    assert config.get_runtime_config() == {}
    assert config.get_global_config()["heartbeat_interval_ms"] == 700
    assert config.get_global_config()["log_level"] == "info"  # the runtime's default


def test_configured_is_scoped_and_nests(monkeypatch):
    from monarch.config import configured, get_global_config, get_runtime_config

    monkeypatch.delenv("MONARCH_RDMA_DISABLE_IBVERBS", raising=False)
    monkeypatch.delenv("MONARCH_WORKER_MEMORY_CAP", raising=False)
    with configured(rdma_disable_ibverbs=True) as outer:
        assert outer["rdma_disable_ibverbs"] is True
        assert os.environ["MONARCH_RDMA_DISABLE_IBVERBS"] == "1"
        with configured(worker_memory_cap=1 << 20, rdma_disable_ibverbs=False) as inner:
            assert inner["worker_memory_cap"] == 1 << 20
            assert inner["rdma_disable_ibverbs"] is False
        assert get_global_config()["rdma_disable_ibverbs"] is True
        assert "MONARCH_WORKER_MEMORY_CAP" not in os.environ
        assert get_runtime_config() == {"rdma_disable_ibverbs": True}
    assert "MONARCH_RDMA_DISABLE_IBVERBS" not in os.environ
    assert get_global_config()["rdma_disable_ibverbs"] is False


def test_configure_refuses_what_it_cannot_do():
    import monarch
    from monarch.config import ConfigError, configure, configured, get_runtime_config

    with pytest.raises(ConfigError, match="no setting 'bogus'"):
        configure(bogus=1)
    with pytest.raises(ConfigError, match="Monarch setting this runtime does not have"):
        configure(default_transport="tcp")
    with pytest.raises(ConfigError, match="timeout_ms"):
        configure(host_spawn_ready_timeout="30s")
    with pytest.raises(TypeError):
        configure(rdma_disable_ibverbs="yes")
    with pytest.raises(TypeError):
        configure(heartbeat_interval_ms=1.5)
    with pytest.raises(ValueError, match="duration"):
        configure(heartbeat_interval_ms="soon")
    with pytest.raises(ValueError, match="one of"):
        configure(backend="gpu")
    with pytest.raises(ValueError, match="at least 1"):
        configure(max_procs_per_host=0)
    # Nothing is set when one of the settings is refused.
    with pytest.raises(ConfigError):
        configure(log_level="debug", bogus=1)
    assert get_runtime_config() == {}
    with pytest.raises(ConfigError, match="not kept in files"):
        with configured(tail_log_lines=10):
            pass
    # What this runtime always does is accepted; the opposite is refused.
    with configured(enable_log_forwarding=True, prefix_with_rank=True) as config:
        assert config["enable_log_forwarding"] is True and config["prefix_with_rank"] is True
        assert get_runtime_config() == {"enable_log_forwarding": True, "prefix_with_rank": True}
    assert get_runtime_config() == {}
    with pytest.raises(ConfigError, match="forwarded"):
        configure(enable_log_forwarding=False)
    assert monarch.configured is configured and monarch.configure is configure


def test_parametrize_config_runs_each_combination(tmp_path):
    (tmp_path / "test_params.py").write_text(textwrap.dedent("""
        import os
        from monarch.config import parametrize_config, parametrize_config_pointwise

        @parametrize_config(log_level={"debug", "error"}, bind_cores={True, False})
        def test_env():
            with open("seen.txt", "a") as f:
                f.write(os.environ["MONARCH_LOG"] + os.environ["MONARCH_BIND_CORES"] + "\\n")

        @parametrize_config_pointwise(log_level=["debug", "info"], worker_memory_cap=[1, 2])
        def test_pointwise():
            with open("pointwise.txt", "a") as f:
                f.write(os.environ["MONARCH_LOG"] + os.environ["MONARCH_WORKER_MEMORY_CAP"] + "\\n")

        def test_after():
            assert "MONARCH_BIND_CORES" not in os.environ
            assert "MONARCH_WORKER_MEMORY_CAP" not in os.environ
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("MONARCH_LOG", None)
    env.pop("MONARCH_BIND_CORES", None)
    env.pop("MONARCH_WORKER_MEMORY_CAP", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_params.py"], capture_output=True, text=True, timeout=120,
                         env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "7 passed" in out.stdout
    seen = sorted((tmp_path / "seen.txt").read_text().split())
    assert seen == ["debug0", "debug1", "error0", "error1"]
    assert (tmp_path / "pointwise.txt").read_text().split() == ["debug1", "info2"]
    from monarch.config import parametrize_config_pointwise
    with pytest.raises(ValueError, match="one length"):
        parametrize_config_pointwise(log_level=["debug"], bind_cores=[True, False])


# -- the active mesh (tensor side) -------------------------------------------------------

def test_get_active_mesh_and_no_mesh():
    torch = pytest.importorskip("torch")
    pytest.importorskip("monarch.plan_pb2")
    import monarch
    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 2}, backend="sim")
    try:
        with pytest.raises(ValueError, match="no device mesh is active"):
            monarch.get_active_mesh()
        with mesh.activate():
            assert monarch.get_active_mesh() is mesh
            t = torch.ones(2)
            with monarch.no_mesh.activate():
                local = torch.ones(2) + 1
                assert not isinstance(local, monarch.Tensor)
                assert local.tolist() == [2.0, 2.0]
                with pytest.raises(ValueError):
                    monarch.get_active_mesh()
                with mesh.activate():  # captures again inside
                    u = torch.full((2,), 3.0)
                    assert isinstance(u, monarch.Tensor)
                assert not isinstance(torch.zeros(1), monarch.Tensor)
            assert monarch.get_active_mesh() is mesh
            v = t + 1
            assert isinstance(v, monarch.Tensor)
        assert monarch.inspect(v, gpu=1).tolist() == [2.0, 2.0]
        assert monarch.inspect(u, gpu=0).tolist() == [3.0, 3.0]
    finally:
        mesh.stop()


# -- in actors ---------------------------------------------------------------------------

class Probe(Actor):
    def __init__(self, base: int = 0):
        self.base = base
        self.init_rank = current_rank()

    @endpoint
    def where(self):
        ctx = context()
        inst = ctx.actor_instance
        try:
            inst.proc_mesh
            proc_mesh = "available"
        except NotImplementedError as e:
            proc_mesh = str(e)
        return {
            "rank": current_rank(),
            "is_point": isinstance(current_rank(), Point),
            "flat": current_rank().rank,
            "size": current_size(),
            "init_rank": self.init_rank,
            "message_rank": ctx.message_rank,
            "instance_rank": inst.rank,
            "name": inst.name,
            "class_name": inst.class_name,
            "actor_id": str(inst.actor_id),
            "actor_name": inst.actor_id.actor_name,
            "current_actor_name": current_actor_name(),
            "repr": repr(inst),
            "proc_mesh": proc_mesh,
        }

    @endpoint
    def value(self, extra: int = 0) -> int:
        return self.base + current_rank().rank + extra

    @endpoint
    def delayed(self, slow_rank: int, seconds: float) -> int:
        if current_rank().rank == slow_rank:
            time.sleep(seconds)
        return current_rank().rank

    @endpoint
    def fail_on(self, rank: int) -> int:
        if current_rank().rank == rank:
            raise ValueError(f"rank {rank} fails")
        return current_rank().rank

    def plain(self, x: int) -> int:
        return 100 * x + current_rank().rank

    def plain_to_port(self, port, x: int) -> None:
        """Not an endpoint: as_endpoint(..., explicit_response_port=True)."""
        port.send(1000 * x + current_rank().rank)

    def plain_silent(self, port) -> None:
        pass

    @concurrent_endpoint
    async def later(self, x: int) -> int:
        await asyncio.sleep(0.01)
        return x + 1


@pytest.fixture(scope="module")
def procs():
    mesh = this_host().spawn_procs({"host": 2, "gpu": 2}, backend="sim")
    yield mesh
    mesh.stop()


@pytest.fixture(scope="module")
def probes(procs):
    return procs.spawn("probes", Probe, 10)


@needs_actors
def test_current_rank_is_a_point_in_actors(probes):
    vm = probes.where.call().get(timeout=30)
    for point, info in vm.items():
        assert info["is_point"] is True
        assert isinstance(info["rank"], Point)  # travels back as a Point
        assert info["rank"] == point and info["rank"]["gpu"] == point["gpu"]
        assert info["flat"] == point["host"] * 2 + point["gpu"] == point.rank
        assert info["rank"].extent == Extent(["host", "gpu"], [2, 2])
        assert info["size"] == {"host": 2, "gpu": 2}
        assert info["init_rank"] == info["rank"]  # the constructor sees the same point
        assert str(info["rank"]) == f"{{'host': {point['host']}/2, 'gpu': {point['gpu']}/2}}"


@needs_actors
def test_context_describes_the_actor(probes):
    infos = probes.where.call().get(timeout=30).values()
    for i, info in enumerate(infos):
        assert info["message_rank"] == info["rank"] == info["instance_rank"]
        assert info["name"] == "probes" and info["actor_name"] == "probes"
        assert info["class_name"].endswith("Probe")
        assert info["actor_id"] == info["current_actor_name"]
        assert info["actor_id"].endswith(f"probes[{i}]")
        assert info["repr"].startswith("<") and "probes" in info["repr"]
        assert "pass the ProcMesh" in info["proc_mesh"]
    assert len({info["current_actor_name"] for info in infos}) == 4


@needs_actors
def test_message_rank_is_the_point_in_the_slice_messaged(probes):
    # The whole mesh: the spawn point.
    whole = probes.where.call().get(timeout=30).values()
    assert [i["message_rank"].rank for i in whole] == [0, 1, 2, 3]
    # A slice that keeps both dims: points and sizes of the slice.
    infos = probes.slice(gpu=slice(1, 2)).where.call().get(timeout=30).values()
    assert [dict(i["message_rank"]) for i in infos] == [{"host": 0, "gpu": 0},
                                                        {"host": 1, "gpu": 0}]
    assert [i["size"] for i in infos] == [{"host": 2, "gpu": 1}] * 2
    # The actor itself is still where it was spawned.
    assert [i["instance_rank"].rank for i in infos] == [1, 3]
    assert [dict(i["init_rank"]) for i in infos] == [{"host": 0, "gpu": 1},
                                                     {"host": 1, "gpu": 1}]
    # An integer coordinate drops its dim; one actor is the point of no dims.
    row = probes.slice(host=1).where.call().get(timeout=30).values()
    assert [dict(i["message_rank"]) for i in row] == [{"gpu": 0}, {"gpu": 1}]
    one = probes.slice(host=1, gpu=1).where.call_one().get(timeout=30)
    assert one["message_rank"].rank == 0 and len(one["message_rank"]) == 0
    assert one["instance_rank"].rank == 3


def test_context_in_the_controller_is_the_root_client():
    point = current_rank()
    assert isinstance(point, Point) and len(point) == 0 and point.rank == 0
    assert current_size() == {}
    assert str(context().actor_instance) == "<root>"
    assert context().message_rank == point
    assert current_actor_name() == str(context().actor_instance.actor_id)


@needs_actors
def test_stream_yields_futures_in_arrival_order(probes):
    futures = list(probes.delayed.stream(0, 0.5))  # rank 0 answers last
    assert len(futures) == 4 and all(isinstance(f, Future) for f in futures)
    first = futures[0].get(timeout=30)
    assert first != 0  # the first future is the first reply, not rank 0's
    values = [first] + [f.get(timeout=30) for f in futures[1:]]
    assert sorted(values) == [0, 1, 2, 3] and values[-1] == 0

    async def together():  # every future awaited at once, from executor threads
        return await asyncio.gather(*probes.delayed.stream(2, 0.3))

    gathered = asyncio.run(together())
    assert sorted(gathered) == [0, 1, 2, 3] and gathered[-1] == 2


@needs_actors
def test_stream_futures_can_be_awaited_and_carry_errors(probes):
    async def main():
        return [await f for f in probes.value.stream(1)]

    assert sorted(asyncio.run(main())) == [11, 12, 13, 14]
    outcomes = []
    for f in probes.fail_on.stream(2):
        error = f.exception(timeout=30)
        outcomes.append(type(error).__name__ if error is not None else f.get())
    assert sorted(outcomes, key=str) == [0, 1, 3, "ActorError"]


@needs_actors
def test_accumulator(probes):
    total = Accumulator(probes.value, 0, operator.add)
    fut = total.accumulate(extra=5)
    assert isinstance(fut, Future)
    assert fut.get(timeout=30) == (10 + 5) * 4 + 0 + 1 + 2 + 3
    seen = Accumulator(probes.value, [], lambda acc, v: acc + [v]).accumulate()
    assert sorted(seen.get(timeout=30)) == [10, 11, 12, 13]
    assert asyncio.run(_await(total.accumulate())) == 10 * 4 + 6
    # current_rank() in an actor is its point in the slice the message went to.
    sliced = Accumulator(probes.slice(host=1).value, 0, operator.add)
    assert sliced.accumulate().get(timeout=30) == 10 * 2 + 0 + 1
    with pytest.raises(TypeError):
        Accumulator(lambda: 1, 0, operator.add)


async def _await(fut):
    return await fut


@needs_actors
def test_as_endpoint_calls_a_plain_method(probes):
    with pytest.raises(RuntimeError, match="as_endpoint"):
        probes.plain(1)  # not an endpoint
    with pytest.raises(AttributeError, match="as_endpoint"):
        probes.plain.call(1)
    ep = as_endpoint(probes.plain)
    assert ep.call(2).get(timeout=30).values() == [200, 201, 202, 203]
    assert as_endpoint(probes.slice(host=1, gpu=0).plain).call_one(3).get(timeout=30) == 300
    assert sorted(f.get(timeout=30) for f in as_endpoint(probes.plain).stream(0)) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="not an @endpoint"):
        as_endpoint(probes.value)
    with pytest.raises(AttributeError, match="no endpoint 'missing'"):
        probes.missing


@needs_actors
def test_as_endpoint_with_an_explicit_response_port(probes):
    from monarch.actor import Channel, send

    ep = as_endpoint(probes.plain_to_port, explicit_response_port=True)
    assert ep.call(2).get(timeout=30).values() == [2000, 2001, 2002, 2003]
    assert as_endpoint(probes.slice(host=1, gpu=1).plain_to_port,
                       explicit_response_port=True).call_one(5).get(timeout=30) == 5000
    # Through send(): the method gets the channel's port and sends on it.
    port, received = Channel.open_ranked()
    send(ep, (7,), {}, port=port)
    got = sorted(received.recv().get(timeout=30) for _ in range(4))
    assert got == [(r, 7000 + r) for r in range(4)]
    # Without the flag the method gets no port: its first argument is x.
    with pytest.raises(Exception, match="plain_to_port"):
        as_endpoint(probes.slice(host=0, gpu=0).plain_to_port).call_one(1).get(timeout=30)
    # A method that returns without sending fails the call with a clear error.
    silent = as_endpoint(probes.slice(host=0, gpu=0).plain_silent, explicit_response_port=True)
    with pytest.raises(Exception, match="returned without sending on its port"):
        silent.call_one().get(timeout=30)


@needs_actors
def test_concurrent_endpoint_is_an_async_endpoint(probes):
    assert probes.later.call(1).get(timeout=30).values() == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="async"):
        class Sync(Actor):
            @concurrent_endpoint
            def f(self):
                return 1
    with pytest.raises(ValueError, match="does not wrap @endpoint"):
        class Twice(Actor):
            @concurrent_endpoint
            @endpoint
            async def f(self):
                return 1
    from monarch.actor.concurrent import concurrent_endpoint as same
    assert same is concurrent_endpoint


@needs_actors
def test_value_mesh_of_a_call_flattens_and_slices(probes):
    vm = probes.value.call().get(timeout=30)
    flat = vm.flatten("r")
    assert [flat.slice(r=i).item() for i in range(4)] == [10, 11, 12, 13]
    assert [(p.rank, v) for p, v in flat.items()] == [(0, 10), (1, 11), (2, 12), (3, 13)]
    assert vm.slice(gpu=1).values() == [11, 13]
    assert vm.slice(host=1).item(gpu=0) == 12


@needs_actors
def test_max_procs_per_host_setting_reaches_the_runtime():
    from monarch.config import configured

    with configured(max_procs_per_host=1):
        with pytest.raises(Exception, match="MONARCH_MAX_PROCS_PER_HOST"):
            mesh = this_host().spawn_procs({"gpu": 3}, backend="sim")
            mesh.spawn("p", Probe)


# -- programs written as Monarch's docs write them ------------------------------------------

_SCRIPT = '''
import operator
from monarch.actor import (Accumulator, Actor, Point, context, current_rank, current_size,
                           endpoint, this_host)
from monarch.config import configured

class Worker(Actor):
    def __init__(self):
        self.rank = current_rank().rank

    @endpoint
    def info(self):
        return current_rank(), current_size(), context().actor_instance.rank.rank

    @endpoint
    def value(self):
        return self.rank

with configured(heartbeat_interval_ms=250):
    procs = this_host().spawn_procs(per_host={"hosts": 1, "gpus": 2}, backend="sim")
workers = procs.spawn("workers", Worker)
vm = workers.info.call().get()
for point, (rank, size, flat) in vm.flatten("r").items():
    assert isinstance(rank, Point) and rank.rank == flat == point.rank, (point, rank)
    print("rank", point.rank, str(rank), size)
print("sum", Accumulator(workers.value, 0, operator.add).accumulate().get())
print("stream", sorted(f.get() for f in workers.value.stream()))
print("first", vm.flatten("r").slice(r=0).item()[0])
procs.stop()
'''


@needs_actors
def test_monarch_style_script_runs_at_top_level(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(_SCRIPT)
    out = run_script(script)
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.splitlines()
    assert "rank 0 {'hosts': 0/1, 'gpus': 0/2} {'hosts': 1, 'gpus': 2}" in lines
    assert "rank 1 {'hosts': 0/1, 'gpus': 1/2} {'hosts': 1, 'gpus': 2}" in lines
    assert "sum 1" in lines and "stream [0, 1]" in lines
    assert "first {'hosts': 0/1, 'gpus': 0/2}" in lines


_THIS_PROC_SCRIPT = '''
from monarch.actor import Actor, endpoint, this_proc

class Counter(Actor):
    def __init__(self, initial_value: int):
        self.value = initial_value

    @endpoint
    def increment(self) -> None:
        self.value += 1

    @endpoint
    def get_value(self) -> int:
        return self.value

class Errorful(Actor):
    @endpoint
    def say_hello(self):
        raise Exception("I don't want to")

counter = this_proc().spawn("counter", Counter, initial_value=0)
counter.increment.broadcast()
print("Counter value:", counter.get_value.call_one().get())
e = this_proc().spawn("errorful", Errorful)
try:
    e.say_hello.call_one().get()
except Exception:
    print("It didn't say hello")
print("same proc:", this_proc() is this_proc())
'''


@needs_actors
def test_this_proc_spawns_actors_as_monarchs_getting_started_does(tmp_path):
    """this_proc().spawn(...) at the top level of a script (Monarch's getting
    started): a one-proc mesh started on first use, the same on every call."""
    script = tmp_path / "getting_started.py"
    script.write_text(_THIS_PROC_SCRIPT)
    out = run_script(script)
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.splitlines()
    assert "Counter value: 1" in lines
    assert "It didn't say hello" in lines
    assert "same proc: True" in lines


@needs_actors
def test_this_proc_is_replaced_once_stopped():
    from monarch.actor import this_proc

    first = this_proc()
    assert this_proc() is first and len(first) == 1
    first.stop().get()
    second = this_proc()
    assert second is not first and not second._root.stopped
    second.stop().get()


def test_a_future_is_driven_as_a_coroutine():
    """asyncio.run and create_task take only coroutines; Monarch's async
    methods are coroutines, so a Future is one too."""
    import asyncio

    from monarch import Future

    assert asyncio.iscoroutine(Future.ready(1))
    assert asyncio.run(Future.ready(5)) == 5

    async def main():
        return await asyncio.create_task(Future.ready(7))

    assert asyncio.run(main()) == 7
    with pytest.raises(KeyError):
        asyncio.run(Future.failed(KeyError("x")))


@needs_actors
def test_extents_of_host_proc_and_actor_meshes():
    from monarch.actor import Extent, this_host

    # Monarch's local host mesh has no dimensions (hyperactor's
    # HostMeshRef::from_host_agent: Extent::unity()); a proc mesh on it has
    # the per_host dims only, and per_host may name "hosts" itself.
    assert this_host().extent == Extent([], []) and this_host().extent.nelements == 1
    procs = this_host().spawn_procs(per_host={"gpus": 2}, backend="sim")
    try:
        assert isinstance(procs.extent, Extent) and procs.extent == {"gpus": 2}
        assert procs.extent.nelements == 2
    finally:
        procs.stop()
    procs = this_host().spawn_procs(per_host={"hosts": 1, "gpus": 2}, backend="sim")
    try:
        assert procs.extent == Extent(["hosts", "gpus"], [1, 2])
    finally:
        procs.stop()


_SPMD_TRAIN = '''
import os, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
out = sys.argv[1]
with open(os.path.join(out, f"rank{os.environ['RANK']}"), "w") as f:
    f.write(" ".join([os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["WORLD_SIZE"],
                      os.environ["LOCAL_WORLD_SIZE"], os.environ["GROUP_RANK"], str(t.item())]))
dist.destroy_process_group()
'''


@needs_actors
def test_spmd_actor_runs_a_torch_distributed_script(tmp_path):
    """SPMDActor gives each actor torchrun's environment and runs an
    unchanged torch.distributed script, one copy per proc (Monarch's
    spmd_ddp example, with Gloo)."""
    from monarch.actor import this_host
    from monarch.spmd import SPMDActor

    script = tmp_path / "train.py"
    script.write_text(_SPMD_TRAIN)
    procs = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2})
    try:
        actors = procs.spawn("_SPMDActor", SPMDActor)
        first = dict.fromkeys(procs._labels, 0)
        addr, port = actors.slice(**first).get_host_port.call_one(None).get()
        assert actors.main.call(addr, port, [str(script), str(tmp_path)]).get().values() \
            == [True] * 4
    finally:
        procs.stop()
    rows = sorted((tmp_path / f"rank{r}").read_text().split() for r in range(4))
    # rank, local rank, world, local world, group rank, sum of rank + 1
    assert rows == [["0", "0", "4", "2", "0", "10.0"], ["1", "1", "4", "2", "0", "10.0"],
                    ["2", "0", "4", "2", "1", "10.0"], ["3", "1", "4", "2", "1", "10.0"]]


@needs_actors
@pytest.mark.skipif(not backend_available("c"), reason="monarch._C is not built")
def test_hosts_from_config_stands_in_with_local_hosts(tmp_path):
    script = tmp_path / "hosts.py"
    script.write_text(textwrap.dedent("""
        import torch
        from monarch import fetch_shard
        from monarch.actor import Actor, context, endpoint, hosts_from_config

        class Trainer(Actor):
            @endpoint
            def step(self):
                return dict(context().message_rank)

        # As Monarch's getting started: a local mesh first, the hosts after.
        from monarch.actor import this_proc
        first = this_proc().spawn("first", Trainer).step.call_one().get()
        hosts = hosts_from_config("MONARCH_HOSTS")
        procs = hosts.spawn_procs(per_host={"gpus": 2})
        print(dict(procs.extent))
        print(procs.spawn("trainer", Trainer).step.call().get().values())
        with procs.activate():
            t = torch.full((2,), 7.0)
        print(fetch_shard(t, hosts=1, gpus=0).get().tolist())
        procs.stop()
    """))
    env_name = "MONARCH_HOSTS"
    saved = os.environ.pop(env_name, None)
    try:
        result = run_script(script, timeout=180)
    finally:
        if saved is not None:
            os.environ[env_name] = saved
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("2 local hosts (processes of this machine) stand in") == 1
    assert "Traceback" not in result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-3] == "{'hosts': 2, 'gpus': 2}"
    assert lines[-2] == str([{"hosts": h, "gpus": g} for h in range(2) for g in range(2)])
    assert lines[-1] == "[7.0, 7.0]"


def test_hosts_from_config_needs_the_secret_of_listed_hosts(monkeypatch):
    from monarch.actor import hosts_from_config

    monkeypatch.setenv("MY_HOSTS", "127.0.0.1:29650")
    monkeypatch.delenv("MY_HOSTS_SECRET_FILE", raising=False)
    with pytest.raises(ValueError, match="MY_HOSTS_SECRET_FILE"):
        hosts_from_config("MY_HOSTS")
    with pytest.raises(TypeError, match="name of a host mesh"):
        hosts_from_config("")
