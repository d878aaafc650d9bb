#!/usr/bin/env python3
"""Bad calls against monarch's public Python API, on real meshes (the
reliability issue: ten times the earlier audit's 70 bad calls).

    PYTHONPATH=build/python /usr/bin/python3 bench/reliability/bad_api_calls.py [-v]
        [--only SUBSTRING] [--list]

The table (:func:`build_cases`) is entry points x bad values: each row names
the category, the entry point (``ProcMesh.slice``, ``Future.get(timeout)``,
``monarch.config.configure``, ...), the bad value, the exception types a
clear refusal may have and a regular expression its message must contain
(the argument or the rule it breaks). The calls run against live meshes --
a ``c`` mesh (worker processes, the default backend) with Python actors, and
``sim`` meshes -- and tensor entry points run on both backends.

A call **passes** when it raises one of the expected types (an ``Exception``,
never a crash) within :data:`HANG_S` seconds, with a message that is not
empty, matches the row's expression and does not leak an internal error
(a pybind11 signature, ``'<' not supported between ...``, ``... has no
attribute ...``: see :data:`LEAKS`). Everything else is a failure: it did not
raise, it hung, it raised an unclear error. A watchdog thread ends the run
(exit status 3, after killing this process's children) if one call blocks
for more than :data:`HANG_S` seconds, naming it. Every :data:`CHECK_EVERY` calls and after
each category, good calls must still work -- an adverb on the actors,
tensors on both backends, an RDMA read -- and no state may leak (an active
mesh or stream, a setting ``configure`` half-applied); a broken mesh is a
failure and the meshes are made anew. At the end every mesh is stopped and no
child process may be left. The summary counts calls per category and lists
the failures; the exit status is 1 if any.

``test/python/test_bad_api_calls.py`` runs a few rows of every entry point
under pytest.
"""

from __future__ import annotations

import argparse
import collections
import copy
import ctypes
import faulthandler
import math
import os
import pickle
import queue
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
try:
    import monarch  # noqa: F401
except ImportError:  # run from the source tree without PYTHONPATH
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import monarch  # noqa: F401

import torch  # noqa: E402

import monarch.actor  # noqa: E402
import monarch.config as mconfig  # noqa: E402
from monarch import MonarchUsageError, SupervisionError  # noqa: E402
from monarch.actor import (Accumulator, Actor, ActorError, Channel, Extent, Future,  # noqa: E402
                           Point, Port, ValueMesh, as_endpoint, attach_hosts,
                           concurrent_endpoint, endpoint, send, slurm_hosts, this_host)
from monarch.config import ConfigError  # noqa: E402
from monarch.rdma import RDMABuffer, RDMAError, submit  # noqa: E402

#: A call that takes longer than this (seconds) hangs.
HANG_S = 30.0
#: Good calls are checked every this many bad calls (and after each category).
CHECK_EVERY = 40

#: Messages that leak an internal error instead of saying what is wrong.
LEAKS = re.compile(
    r"incompatible (function|constructor) arguments|Unable to cast Python instance|"
    r"object is not iterable|not supported between instances of|"
    r"invalid literal for int\(\)|cannot unpack non-iterable|not enough values to unpack|"
    r"has no attribute '_|object has no attribute|dictionary update sequence|"
    r"unsupported operand type|object is not callable|cannot convert float (NaN|infinity)|"
    r"list indices must be",
    re.I)
#: Exception types that say "a bug in the library" rather than "a bad argument"
#: (allowed only where a row expects one, e.g. AttributeError for an endpoint
#: that does not exist).
UNCLEAR_TYPES = (AttributeError, NameError, AssertionError, SystemError, RecursionError,
                 ZeroDivisionError, MemoryError, StopIteration)

TE, VE, KE, IE = TypeError, ValueError, KeyError, IndexError
TV = (TypeError, ValueError)
MUE = MonarchUsageError
SE = SupervisionError

# ---------------------------------------------------------------------------------------
# Actors of the campaign
# ---------------------------------------------------------------------------------------


class Target(Actor):
    """The actors bad calls are aimed at."""

    @endpoint
    def ping(self, x: Any = 0) -> Any:
        return x

    @endpoint
    def two(self, a: Any, b: Any) -> Any:
        return a + b

    @endpoint
    def boom(self) -> None:
        raise ValueError("boom: Target.boom raises on purpose")

    def plain(self) -> int:  # not an endpoint
        return 1


class BadInit(Actor):
    def __init__(self) -> None:
        raise RuntimeError("BadInit's constructor raises on purpose")

    @endpoint
    def ping(self) -> int:
        return 0


class NotAnActor:
    pass


class BadPickle:
    def __reduce__(self) -> Any:
        raise TypeError("BadPickle refuses to be pickled")


def _holds_lock() -> Callable[[], Any]:
    lock = threading.Lock()
    return lambda: lock  # a closure: cloudpickle takes it by value, lock and all


async def _async_method(self: Any) -> int:
    return 1


def _sync_method(self: Any) -> int:
    return 1


# ---------------------------------------------------------------------------------------
# The meshes bad calls run against
# ---------------------------------------------------------------------------------------


class TensorMesh:
    """A mesh with tensors made on it (before any bad call)."""

    def __init__(self, mesh: Any):
        self.mesh = mesh
        with mesh.activate():
            self.t = torch.ones(4, 3)               # float32 (4, 3)
            self.s = torch.ones(2, 3)               # leading size = gpu's 2 ranks
            self.v3 = torch.ones(3)                 # leading size not a multiple of 2
            self.z = torch.ones(())                 # 0-d
            self.i = torch.ones(4, 3, dtype=torch.int64)
            self.g = torch.ones(4, requires_grad=True)
            self.gloss = (self.g * 2).sum()
        with mesh.slice(gpu=0).activate():
            self.sliced = torch.ones(4, 3)          # on a view: another mesh
        self.local = torch.ones(4, 3)               # plain local torch

    def good(self, k: int) -> Optional[str]:
        with self.mesh.activate():
            x = torch.full((2,), float(k))
            r = x.reduce("gpu", "sum")
        got = monarch.inspect(r, gpu=1)
        want = torch.full((2,), 2.0 * k)
        if not torch.equal(got, want):
            return f"reduce over gpu gave {got.tolist()}, not {want.tolist()}"
        return None


class Env:
    """The meshes, actors and other objects of the campaign. Objects that are
    costly or have side effects (stopped meshes, failed actors) are made at
    their first use."""

    def __init__(self) -> None:
        self.serial = 0
        self.config0 = mconfig.get_runtime_config()  # what configure() set before us
        self.events: List[Any] = []
        self._hook = monarch.actor.unhandled_fault_hook
        monarch.actor.unhandled_fault_hook = self.events.append
        self.meshes: List[Any] = []
        self.cleanup: List[Callable[[], Any]] = []
        self._lazy: Dict[str, Any] = {}
        self.c = self._spawn({"host": 1, "gpu": 2})                 # default backend: c
        self.sim = self._spawn({"host": 2, "gpu": 2}, backend="sim")
        self.sim2 = self._spawn({"host": 2, "gpu": 2}, backend="sim")
        self.actors = self.c.spawn("targets", Target)
        self.one = self.actors.slice(gpu=0)
        self.tm = {"c": TensorMesh(self.c), "sim": TensorMesh(self.sim)}
        self.port, self.receiver = Channel.open()
        self.vm = ValueMesh(["host", "gpu"], [2, 2], [0, 1, 2, 3])
        self.extent = Extent(["a", "b"], [2, 3])
        self.buf = RDMABuffer(torch.arange(16, dtype=torch.float32))  # 64 bytes
        self.secret = tempfile.NamedTemporaryFile(prefix="monarch-bad-calls-", delete=False)
        self.secret.write(b"0123456789abcdef0123456789abcdef")
        self.secret.close()
        os.chmod(self.secret.name, 0o600)

    def _spawn(self, shape: Dict[str, int], **kw: Any) -> Any:
        m = this_host().spawn_procs(shape, **kw)
        self.meshes.append(m)
        return m

    def fresh(self, what: str) -> str:
        self.serial += 1
        return f"{what}{self.serial}"

    def lazy(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._lazy:
            self._lazy[key] = make()
        return self._lazy[key]

    # -- objects made at first use -------------------------------------------------
    def stopped(self, backend: str) -> TensorMesh:
        """A mesh with a tensor on it, stopped."""
        def make() -> TensorMesh:
            if backend == "c":
                m = self._spawn({"host": 1, "gpu": 1})
            else:
                m = self._spawn({"host": 2, "gpu": 2}, backend="sim")
            tm = TensorMesh(m)
            m.stop().get(timeout=HANG_S)
            return tm
        return self.lazy(f"stopped-{backend}", make)

    def stopped_actors(self) -> Any:
        def make() -> Any:
            a = self.c.spawn("stopped_targets", Target)
            a.stop().get(timeout=HANG_S)
            return a
        return self.lazy("stopped-actors", make)

    def failed_actors(self) -> Any:
        """Actors whose constructor raised, once their events arrived."""
        def make() -> Any:
            a = self.c.spawn("badinit", BadInit)
            deadline = time.monotonic() + HANG_S
            while time.monotonic() < deadline:
                if len(a._state.failed.get(a._cname, {})) >= 2:
                    break
                time.sleep(0.05)
            return a
        return self.lazy("failed-actors", make)

    def pending(self) -> Future:
        """A future that never completes (a receive on a silent channel)."""
        return self.receiver.recv()

    def actor_future(self) -> Future:
        f = self.actors.ping.call(1)
        f.get(timeout=HANG_S)
        return f

    def fetch_future(self, backend: str) -> Future:
        return monarch.fetch_shard(self.tm[backend].t)

    def dropped_buffer(self) -> RDMABuffer:
        def make() -> RDMABuffer:
            b = RDMABuffer(bytearray(8))
            b.drop()
            return b
        return self.lazy("dropped-buffer", make)

    def attached(self) -> Any:
        """A host mesh of an agent that is never reached (spawn_procs on it
        must fail before connecting)."""
        return attach_hosts(["127.0.0.1:1"], secret_file="/nonexistent/monarch-secret")

    # -- health ------------------------------------------------------------------
    def check(self, k: int) -> List[str]:
        """Good calls that must work after the bad ones; what is broken."""
        problems = []

        def attempt(what: str, fn: Callable[[], Optional[str]]) -> None:
            try:
                why = fn()
            except BaseException as e:  # noqa: BLE001 - reported
                if isinstance(e, KeyboardInterrupt):
                    raise
                why = f"{type(e).__name__}: {e}"
            if why:
                problems.append(f"{what}: {why}")

        def actors() -> Optional[str]:
            got = self.actors.ping.call(k).get(timeout=HANG_S).values()
            return None if got == [k, k] else f"ping.call({k}) gave {got}"

        def one() -> Optional[str]:
            got = self.one.two.call_one(k, 1).get(timeout=HANG_S)
            return None if got == k + 1 else f"two.call_one({k}, 1) gave {got}"

        def rdma() -> Optional[str]:
            dst = torch.empty(16)
            self.buf.read_into(dst).get(timeout=HANG_S)
            want = torch.arange(16, dtype=torch.float32)
            return None if torch.equal(dst, want) else f"read {dst.tolist()}"

        def state() -> Optional[str]:
            from monarch._src.tensor import modes
            if modes.active_mesh() is not None:
                return f"a mesh is still active: {modes.active_mesh()!r}"
            if monarch.get_active_stream().name != "main":
                return f"stream {monarch.get_active_stream().name!r} is still active"
            if mconfig.get_runtime_config() != self.config0:
                return f"configure() settings leaked: {mconfig.get_runtime_config()}"
            return None

        attempt("actors", actors)
        attempt("call_one", one)
        attempt("tensors on c", lambda: self.tm["c"].good(k))
        attempt("tensors on sim", lambda: self.tm["sim"].good(k))
        attempt("rdma", rdma)
        attempt("state", state)
        return problems

    def close(self) -> None:
        for fn in self.cleanup:
            try:
                fn()
            except Exception:
                pass
        for obj in [self.receiver, self._lazy.get("socket")]:
            try:
                if obj is not None:
                    obj.close()
            except Exception:
                pass
        for m in self.meshes:
            try:
                m.stop()
            except Exception:
                pass
        _restore_config(self.config0)
        monarch.actor.unhandled_fault_hook = self._hook
        try:
            os.unlink(self.secret.name)
        except OSError:
            pass

# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------


class Lazy:
    """A bad value made at call time from the Env (tensors, locks, futures)."""

    def __init__(self, make: Callable[[Env], Any], label: str):
        self.make = make
        self.label = label

    def __repr__(self) -> str:
        return self.label


class V(NamedTuple):
    value: Any
    expect: Any = None          # exception type(s); None: the entry's
    match: Optional[str] = None  # regex the message must contain; None: the entry's
    label: Optional[str] = None


class Case(NamedTuple):
    category: str
    entry: str
    label: str
    call: Callable[[Env], Any]
    expect: Tuple[type, ...]
    match: str


def _label(v: Any) -> str:
    try:
        text = repr(v)
    except Exception as e:  # a broken object (what a bad call returned)
        text = f"<{type(v).__name__} whose repr raised {type(e).__name__}: {e}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _types(expect: Any) -> Tuple[type, ...]:
    return expect if isinstance(expect, tuple) else (expect,)


class Table:
    def __init__(self) -> None:
        self.cases: List[Case] = []

    def add(self, category: str, entry: str, fn: Callable[[Env, Any], Any],
            values: Sequence[Any], expect: Any = None, match: str = "") -> None:
        for v in values:
            if not isinstance(v, V):
                v = V(v)
            exp = _types(v.expect if v.expect is not None else expect)
            rx = v.match if v.match is not None else match
            label = v.label or _label(v.value)

            def call(env: Env, fn: Callable = fn, value: Any = v.value) -> Any:
                if isinstance(value, Lazy):
                    value = value.make(env)
                return fn(env, value)

            self.cases.append(Case(category, entry, label, call, exp, rx))


def L(make: Callable[[Env], Any], label: str) -> Lazy:
    return Lazy(make, label)


def _kw(text: str) -> Dict[str, Any]:
    """``_kw("gpu=2, host=0")`` -> the keywords (labels stay readable)."""
    return eval(f"dict({text})")  # noqa: S307 - the table's own literals


def _kws(texts: Sequence[Tuple[str, Any, str]]) -> List[V]:
    return [V(_kw(t), e, m, t) for t, e, m in texts]


def _consume(x: Any) -> Any:
    """Iterates what the call returned (a generator's errors come at next())."""
    return list(x)


BACKENDS = ("c", "sim")


def build_cases() -> List[Case]:
    tab = Table()
    add = tab.add

    # -- spawn_procs: shapes ---------------------------------------------------------
    shapes = [
        V({"gpu": "2"}, TE, r"'gpu' must have an int size, got str"),
        V({"gpu": 2.0}, TE, r"'gpu' must have an int size, got float"),
        V({"gpu": None}, TE, r"'gpu' must have an int size, got NoneType"),
        V({"gpu": True}, TE, r"'gpu' must have an int size, got bool"),
        V({"gpu": [2]}, TE, r"'gpu' must have an int size, got list"),
        V({"gpu": b"2"}, TE, r"'gpu' must have an int size, got bytes"),
        V({"gpu": complex(2)}, TE, r"'gpu' must have an int size, got complex"),
        V({"gpu": -1}, VE, r"'gpu' must have a positive size, got -1"),
        V({"gpu": 0}, VE, r"'gpu' must have a positive size, got 0"),
        V({"gpu": -(10**12)}, VE, r"'gpu' must have a positive size"),
        V({"gpu": 10**12}, VE, r"at most 1048576 ranks"),
        V({"gpu": 2**63}, VE, r"at most 1048576 ranks"),
        V({"gpu": 2**64}, VE, r"at most 1048576 ranks"),
        V({"gpu": 10**100}, VE, r"at most 1048576 ranks"),
        V({"a": 2**11, "b": 2**10}, VE, r"at most 1048576 ranks; \{a=2048, b=1024\}"),
        V({"a": 1024, "b": 1024, "c": 2}, VE, r"at most 1048576 ranks"),
        V({"": 2}, VE, r"names must not be empty"),
        V({1: 2}, TE, r"names must be str, got int"),
        V({None: 2}, TE, r"names must be str, got NoneType"),
        V({("gpu",): 2}, TE, r"names must be str, got tuple"),
        V({b"gpu": 2}, TE, r"names must be str, got bytes"),
        V("gpu", TE, r"per_host.*dict.*got str"),
        V(5, TE, r"per_host.*dict.*got int"),
        V([2], TE, r"per_host.*dict.*got list"),
        V(2.5, TE, r"per_host.*dict.*got float"),
        V({"gpu"}, TE, r"per_host.*dict.*got set"),
        V(True, TE, r"per_host.*dict.*got bool"),
    ]
    for be in BACKENDS:
        add("spawn_procs", f"this_host().spawn_procs(shape)[{be}]",
            lambda env, v, be=be: this_host().spawn_procs(v, backend=be), shapes)
    add("spawn_procs", "this_host().spawn_procs(**dims)[c]",
        lambda env, v: this_host().spawn_procs(v[0], **v[1]), [
            V(({"gpu": 2}, {"gpu": 2}), VE, r"'gpu' given twice", "({'gpu': 2}, gpu=2)"),
            V(({"gpu": 1, "host": 1}, {"host": 1}), VE, r"'host' given twice",
              "({'gpu':1,'host':1}, host=1)"),
            V(({}, {"gpu": "2"}), TE, r"'gpu' must have an int size, got str", "(gpu='2')"),
            V(({}, {"gpu": 0}), VE, r"'gpu' must have a positive size", "(gpu=0)"),
            V(({"gpu": 1}, {"host": -1}), VE, r"'host' must have a positive size",
              "({'gpu': 1}, host=-1)"),
            V(({}, {"gpu": 1.5}), TE, r"'gpu' must have an int size, got float", "(gpu=1.5)"),
        ])

    # -- spawn_procs: options -----------------------------------------------------------
    add("spawn_procs", "this_host().spawn_procs(backend=)",
        lambda env, v: this_host().spawn_procs({"gpu": 1}, backend=v),
        ["gpu", "C", "Sim", "c ", 5, ["c"], b"c", 1.5], TV,
        r"unknown backend .* \(use 'c' or 'sim'\)")
    for be in BACKENDS:
        add("spawn_procs", f"this_host().spawn_procs(memory_cap=)[{be}]",
            lambda env, v, be=be: this_host().spawn_procs({"gpu": 1}, backend=be, memory_cap=v), [
                V(-1, VE, r"memory_cap must be non-negative"),
                V(-(2**70), VE, r"memory_cap must be non-negative"),
                V(2**70, VE, r"memory_cap .*(at most|below|fit)"),
                V("1GB", TE, r"memory_cap .*int.*got str"),
                V(1.5, TE, r"memory_cap .*int.*got float"),
                V(True, TE, r"memory_cap .*int.*got bool"),
                V([1], TE, r"memory_cap .*int.*got list"),
            ])
        add("spawn_procs", f"this_host().spawn_procs(timeout_ms=)[{be}]",
            lambda env, v, be=be: this_host().spawn_procs({"gpu": 1}, backend=be, timeout_ms=v), [
                V(-1, VE, r"timeout_ms must be positive"),
                V(0, VE, r"timeout_ms must be positive"),
                V(2**70, VE, r"timeout_ms .*(at most|below|fit)"),
                V("x", TE, r"timeout_ms .*int.*got str"),
                V("30s", TE, r"timeout_ms .*int.*got str"),
                V(1.5, TE, r"timeout_ms .*int.*got float"),
                V(None, TE, r"timeout_ms .*int.*got NoneType"),
                V(True, TE, r"timeout_ms .*int.*got bool"),
            ])
        add("spawn_procs", f"this_host().spawn_procs(tensor_worker=)[{be}]",
            lambda env, v, be=be: this_host().spawn_procs({"gpu": 1}, backend=be,
                                                         tensor_worker=v),
            ["rust", "Native", "python ", 5, ["native"]], TV,
            r"tensor_worker must be 'native' or 'python'")

    # -- host meshes ----------------------------------------------------------------------
    add("hosts", "attach_hosts", lambda env, v: attach_hosts(*v[0], **v[1]), [
        V(((), {"secret_file": "/x"}), VE, r"needs either hosts or hosts_file", "(secret_file=)"),
        V(((["a:1"],), {"hosts_file": "/x", "secret_file": "/x"}), VE,
          r"needs either hosts or hosts_file", "(hosts, hosts_file=)"),
        V((([],), {"secret_file": "/x"}), VE, r"no hosts given", "([])"),
        V((("node1:29650",), {"secret_file": "/x"}), TE, r"list of 'HOST:PORT'.*got str",
          "('node1:29650')"),
        V((([5],), {"secret_file": "/x"}), TE, r"'HOST:PORT'.*got int", "([5])"),
        V((([None],), {"secret_file": "/x"}), TE, r"'HOST:PORT'.*got NoneType", "([None])"),
        V(((5,), {"secret_file": "/x"}), TE, r"list of 'HOST:PORT'.*got int", "(5)"),
        V(((), {"hosts_file": "/nonexistent/hosts.txt", "secret_file": "/x"}), OSError,
          r"No such file.*hosts.txt", "(hosts_file=missing)"),
        V(((["a:1"],), {}), TE, r"secret_file", "(no secret_file)"),
    ])
    add("hosts", "HostMesh.spawn_procs (attached)", lambda env, v: v(env), [
        V(lambda env: env.attached().spawn_procs({"hosts": 2}), VE,
          r"'hosts' is the host mesh's dim", "({'hosts': 2})"),
        V(lambda env: env.attached().spawn_procs(), VE, r"needs a per-host dim", "()"),
        V(lambda env: env.attached().spawn_procs({"gpu": 1}, backend="sim"), VE,
          r"needs the 'c' backend", "(backend='sim')"),
        V(lambda env: env.attached().spawn_procs({"gpu": 1}), RuntimeError,
          r"cannot open secret file /nonexistent", "(secret missing)"),
        V(lambda env: attach_hosts(["nohost"], secret_file=env.secret.name).spawn_procs(
            {"gpu": 1}), RuntimeError, r"'nohost' is not HOST:PORT", "(['nohost'])"),
        V(lambda env: env.attached().spawn_procs({"gpu": 0}), VE,
          r"'gpu' must have a positive size", "({'gpu': 0})"),
    ])
    if not os.environ.get("SLURM_JOB_ID"):
        add("hosts", "slurm_hosts", lambda env, v: slurm_hosts(**v),
            [V({}, label="()"), V({"agents_per_node": 2}, label="(agents_per_node=2)")],
            RuntimeError, r"not inside a SLURM allocation")

    # -- mesh views ---------------------------------------------------------------------
    slices = _kws([
        ("foo=0", KE, r"no dimension 'foo' \(dimensions: host, gpu\)"),
        ("hosts=0", KE, r"no dimension 'hosts'"),
        ("gpu=2", IE, r"index 2 out of range for dimension 'gpu' of size 2"),
        ("gpu=-3", IE, r"index -3 out of range for dimension 'gpu'"),
        ("gpu=10**12", IE, r"index 1000000000000 out of range"),
        ("gpu=-(10**12)", IE, r"out of range for dimension 'gpu'"),
        ("gpu='0'", TE, r"'gpu' takes an int or a slice, got str"),
        ("gpu=1.0", TE, r"'gpu' takes an int or a slice, got float"),
        ("gpu=None", TE, r"'gpu' takes an int or a slice, got NoneType"),
        ("gpu=[0]", TE, r"'gpu' takes an int or a slice, got list"),
        ("gpu=True", TE, r"'gpu' takes an int or a slice, got bool"),
        ("gpu=b'0'", TE, r"'gpu' takes an int or a slice, got bytes"),
        ("gpu=complex(1)", TE, r"'gpu' takes an int or a slice, got complex"),
        ("gpu=object()", TE, r"'gpu' takes an int or a slice, got object"),
        ("gpu=slice(0, 0)", IE, r"range 0:0 out of range for dimension 'gpu'"),
        ("gpu=slice(1, 0)", IE, r"range 1:0 out of range"),
        ("gpu=slice(5, 6)", IE, r"range 5:6 out of range"),
        ("gpu=slice(0, 10**12)", IE, r"range 0:1000000000000 out of range"),
        ("gpu=range(5)", IE, r"range 0:5 out of range"),
        ("gpu=slice(0, 2, 0)", VE, r"slice step for dimension 'gpu' must be positive, got 0"),
        ("gpu=slice(0, 2, -1)", VE, r"must be positive, got -1"),
        ("gpu=slice('a', None)", TE, r"slice of dimension 'gpu' .*int.*got str"),
        ("gpu=slice(None, None, 'x')", TE, r"slice of dimension 'gpu' .*int.*got str"),
        ("gpu=slice(0.5, 1)", TE, r"slice of dimension 'gpu' .*int.*got float"),
        ("gpu=slice(0, 1.5)", TE, r"slice of dimension 'gpu' .*int.*got float"),
        ("gpu=slice(None, None, 1.5)", TE, r"slice of dimension 'gpu' .*int.*got float"),
        ("gpu=slice(True, 2)", TE, r"slice of dimension 'gpu' .*int.*got bool"),
        ("gpu=0, foo=1", KE, r"no dimension 'foo'"),
    ])
    views = [("ProcMesh[c]", lambda env: env.c), ("ProcMesh[sim]", lambda env: env.sim),
             ("ActorMesh", lambda env: env.actors), ("ValueMesh", lambda env: env.vm)]
    for name, get in views:
        add("views", f"{name}.slice", lambda env, v, get=get: get(env).slice(**v), slices)
    for name, get in views[:2] + views[3:]:
        add("views", f"{name}.rename", lambda env, v, get=get: get(env).rename(**v), _kws([
            ("foo='x'", KE, r"no dimension 'foo'"),
            ("gpu=5", TE, r"rename takes new names as str, got int"),
            ("gpu=''", VE, r"names must not be empty"),
            ("host='gpu'", VE, r"duplicate dimension name 'gpu'"),
            ("gpu=None", TE, r"rename takes new names as str, got NoneType"),
            ("gpu=('a', 'b')", TE, r"rename takes new names as str, got tuple"),
            ("gpu=b'x'", TE, r"rename takes new names as str, got bytes"),
            ("gpu=['g']", TE, r"rename takes new names as str, got list"),
        ]))
    for name, get in views[:2]:
        add("views", f"{name}.split", lambda env, v, get=get: get(env).split(**v), _kws([
            ("foo=('a',)", KE, r"no dimension 'foo'"),
            ("gpu=('a', 'b')", VE, r"cannot infer the sizes of both 'a' and 'b'"),
            ("gpu=('a', 'b'), a=3", VE, r"\(product 3\) do not divide its size 2"),
            ("gpu=('a', 'b'), a=2, b=2", VE, r"multiply to 4, not its size 2"),
            ("gpu=()", VE, r"'gpu' must be split into at least one name"),
            ("gpu=(1,)", TE, r"new dimension names must be str, got int"),
            ("gpu=('a', 'b'), a=0", VE, r"size of 'a' must be positive, got 0"),
            ("gpu=('a', 'b'), a=-2", VE, r"size of 'a' must be positive, got -2"),
            ("gpu=('a', 'b'), a=1.0", TE, r"got a=float"),
            ("gpu=('a', 'b'), a=True", TE, r"got a=bool"),
            ("gpu=('a', 'b'), a=2, zz=1", VE, r"size given for 'zz'.*not a dimension created"),
            ("gpu=None", TE, r"got gpu=NoneType"),
            ("gpu=('a', 'a')", VE, r"duplicate dimension name 'a'"),
            ("gpu=('host',)", VE, r"duplicate dimension name 'host'"),
            ("gpu=('',)", VE, r"dimension names must not be empty"),
        ]))
    for name, get in views[:2] + views[3:]:
        add("views", f"{name}.flatten", lambda env, v, get=get: get(env).flatten(v), [
            V("", VE, r"flatten needs a non-empty dimension name"),
            V(5, TE, r"flatten .*str.*got int"),
            V(None, TV, r"flatten .*(str.*got NoneType|non-empty dimension name)"),
            V(b"x", TE, r"flatten .*str.*got bytes"),
            V(["a"], TE, r"flatten .*str.*got list"),
            V(1.5, TE, r"flatten .*str.*got float"),
        ])
    add("views", "ProcMesh.flatten (strided)", lambda env, v: v(env).flatten("r"), [
        V(lambda env: env.sim.slice(gpu=0), VE, r"cannot flatten mesh offset=0 host=2:2",
          "sim.slice(gpu=0)"),
        V(lambda env: env.sim.slice(host=slice(0, 2), gpu=slice(0, 2, 2)), VE,
          r"ranks are not contiguous", "sim.slice(gpu=::2)"),
        V(lambda env: env.vm.slice(gpu=1), VE, r"not contiguous", "vm.slice(gpu=1)"),
    ])
    for name, get in views:
        add("views", f"{name}.size", lambda env, v, get=get: get(env).size(v), [
            V("foo", KE, r"no dimension 'foo'"),
            V(["gpu", "foo"], KE, r"no dimension 'foo'"),
            V(("",), KE, r"no dimension ''"),
            V(5, TE, r"dimension name.*got int"),
            V([5], TE, r"dimension.*str.*got int"),
            V(b"gpu", TE, r"dimension name.*got bytes"),
            V(object(), TE, r"dimension name.*got object", "object()"),
            V([None], TE, r"dimension.*str.*got NoneType"),
        ])
    for be in BACKENDS:
        add("views", f"ProcMesh.rank[{be}]", lambda env, v, be=be: env.tm[be].mesh.rank(v), [
            V("foo", KE, r"no dimension 'foo'"),
            V("", KE, r"no dimension ''"),
            V((), VE, r"rank needs at least one dimension"),
            V(("gpu", "gpu"), VE, r"dimension 'gpu' named twice"),
            V(5, TE, r"dimension name.*got int"),
            V([5], TE, r"dimension.*str.*got int"),
            V(None, TE, r"dimension name.*got NoneType"),
            V(b"gpu", TE, r"dimension name.*got bytes"),
            V(["gpu", 1], TE, r"dimension.*str.*got int"),
        ])

    # -- actors: spawn --------------------------------------------------------------------
    add("actors", "ProcMesh.spawn(name, class)", lambda env, v: env.c.spawn(env.fresh("cls"), v), [
        V(int, label="int"), V(object, label="object"), V(type, label="type"),
        V(NotAnActor, label="NotAnActor"), V(Exception, label="Exception"),
        V(dict, label="dict"),
        V(L(lambda env: Target.__new__(Target), "Target()")),
        V(None), V("Target"), V(print, label="print"), V(_sync_method, label="a function"),
        V(Target.ping, label="Target.ping"),
    ], TE, r"spawn takes an Actor subclass")
    add("actors", "ProcMesh.spawn(name)", lambda env, v: env.c.spawn(v, Target), [
        V(5, TE, r"name.*str.*got int"), V(None, TE, r"name.*str.*got NoneType"),
        V(b"x", TE, r"name.*str.*got bytes"), V(["x"], TE, r"name.*str.*got list"),
        V(1.5, TE, r"name.*str.*got float"),
        V("", VE, r"non-empty name"),
        V("a b", VE, r"'a b'"), V("a[0]", VE, r"'a\[0\]'"), V("x/y", VE, r"'x/y'"),
        V("\x00", VE, r"name"), V("tab\there", VE, r"name"), V("a]", VE, r"'a\]'"),
        V("targets", RuntimeError, r"actor mesh 'targets' exists"),
    ], VE)
    add("actors", "ProcMesh.spawn (stopped)", lambda env, v: v(env).spawn(env.fresh("s"), Target), [
        V(lambda env: env.stopped("c").mesh, RuntimeError, r"has already been stopped", "c"),
        V(lambda env: env.stopped("sim").mesh, RuntimeError, r"has already been stopped",
          "sim"),
        V(lambda env: env.stopped("sim").mesh.slice(host=0), RuntimeError,
          r"has already been stopped", "sim.slice(host=0)"),
    ])

    # -- actors: adverbs with unpicklable arguments --------------------------------------
    unpicklable = [
        V(L(lambda env: threading.Lock(), "Lock()"), TE, r"cannot pickle '_thread.lock'"),
        V(L(lambda env: threading.RLock(), "RLock()"), TE, r"cannot pickle '_thread.RLock'"),
        V(L(lambda env: (i for i in range(3)), "generator"), TE, r"cannot pickle 'generator'"),
        V(L(lambda env: env.lazy("socket", socket.socket), "socket"), TE,
          r"cannot pickle 'socket'"),
        V(L(lambda env: weakref.ref(Target), "weakref"), TE, r"cannot pickle 'weakref"),
        V(L(lambda env: ctypes.pointer(ctypes.c_int(1)), "ctypes pointer"), VE,
          r"ctypes objects containing pointers cannot be pickled"),
        V(L(lambda env: BadPickle(), "BadPickle()"), TE, r"BadPickle refuses"),
        V(L(lambda env: threading.Event(), "Event()"), TE, r"cannot pickle '_thread.lock'"),
        V(L(lambda env: queue.Queue(), "Queue()"), TE, r"cannot pickle '_thread.lock'"),
        V(L(lambda env: sys._getframe(), "frame"), TE, r"cannot pickle 'frame'"),
        V(L(lambda env: env.receiver, "PortReceiver"), TE, r"PortReceiver stays in the process"),
        V(L(lambda env: env.tm["sim"].t, "distributed tensor of other procs"), VE,
          r"a distributed tensor goes to actors on the processes it lives on"),
        V(L(lambda env: [{"t": env.tm["sim"].t}], "distributed tensor of other procs, nested"),
          VE, r"a distributed tensor goes to actors on the processes it lives on"),
        V(L(lambda env: _holds_lock(), "closure over a Lock"), TE, r"cannot pickle '_thread.lock'"),
    ]
    adverbs = [
        ("call", lambda env, v: env.actors.ping.call(v)),
        ("call_one", lambda env, v: env.one.ping.call_one(v)),
        ("choose", lambda env, v: env.actors.ping.choose(v)),
        ("broadcast", lambda env, v: env.actors.ping.broadcast(v)),
        ("stream", lambda env, v: _consume(env.actors.ping.stream(v))),
        ("call(x=...)", lambda env, v: env.actors.ping.call(x=v)),
    ]
    for name, fn in adverbs:
        add("adverbs", f"Endpoint.{name}(unpicklable)", fn, unpicklable)

    add("adverbs", "Endpoint.call_one (several actors)", lambda env, v: v(env), [
        V(lambda env: env.actors.ping.call_one(), label="actors.ping.call_one()"),
        V(lambda env: env.actors.ping.call_one(1), label="actors.ping.call_one(1)"),
        V(lambda env: env.actors.two.call_one(1, 2), label="actors.two.call_one(1, 2)"),
        V(lambda env: env.actors.ping.call_one(threading.Lock()), label="call_one(Lock())"),
        V(lambda env: env.actors.slice(gpu=slice(0, 2)).ping.call_one(),
          label="slice(gpu=0:2).call_one()"),
        V(lambda env: env.actors.slice(host=0).ping.call_one(), label="slice(host=0).call_one()"),
        V(lambda env: as_endpoint(env.actors.plain).call_one(),
          label="as_endpoint(plain).call_one()"),
    ], VE, r"call_one on actor mesh 'targets' of 2 actors; it needs exactly one")

    missing = ["nope", "Ping", "ping_", "__nope__", "_nope", "", "1abc", "call", "stop2",
               "ping.call"]
    add("adverbs", "ActorMesh.<missing endpoint>", lambda env, v: getattr(env.actors, v),
        [V(n, match=rf"actor mesh 'targets' of Target has no endpoint '{re.escape(n)}'")
         for n in missing], AttributeError)
    add("adverbs", "ActorMesh.<missing endpoint>.call()",
        lambda env, v: getattr(env.one, v).call(),
        [V(n, match=rf"has no endpoint '{re.escape(n)}'") for n in missing], AttributeError)
    add("adverbs", "ActorMesh.<not an endpoint>", lambda env, v: v(env.actors.plain), [
        V(lambda p: p(), RuntimeError, r"Target.plain is not an endpoint.*as_endpoint",
          "plain()"),
        V(lambda p: p.call(), AttributeError, r"'plain' is not an endpoint.*as_endpoint",
          "plain.call()"),
        V(lambda p: p.call_one(), AttributeError, r"'plain' is not an endpoint", "plain.call_one"),
        V(lambda p: p.choose(), AttributeError, r"'plain' is not an endpoint", "plain.choose"),
        V(lambda p: p.broadcast(), AttributeError, r"'plain' is not an endpoint",
          "plain.broadcast"),
        V(lambda p: p.stream(), AttributeError, r"'plain' is not an endpoint", "plain.stream"),
        V(lambda p: p.rref(), AttributeError, r"'plain' is not an endpoint", "plain.rref"),
    ])
    add("adverbs", "Endpoint (remote errors)", lambda env, v: v(env), [
        V(lambda env: env.actors.two.call(1).get(timeout=HANG_S),
          match=r"TypeError: .*two\(\) missing 1 required positional argument",
          label="two.call(1)"),
        V(lambda env: env.actors.two.call(1, 2, 3).get(timeout=HANG_S),
          match=r"TypeError: .*two\(\) takes 3 positional arguments but 4",
          label="two.call(1, 2, 3)"),
        V(lambda env: env.actors.ping.call(y=1).get(timeout=HANG_S),
          match=r"unexpected keyword argument 'y'", label="ping.call(y=1)"),
        V(lambda env: env.actors.two.call(1, "x").get(timeout=HANG_S),
          match=r"TypeError: unsupported operand type\(s\) for \+: 'int' and 'str'",
          label="two.call(1, 'x')"),
        V(lambda env: env.actors.boom.call().get(timeout=HANG_S),
          match=r"ValueError: boom: Target.boom raises on purpose", label="boom.call()"),
        V(lambda env: env.one.boom.call_one().get(timeout=HANG_S),
          match=r"boom: Target.boom raises", label="boom.call_one()"),
        V(lambda env: env.actors.boom.choose().get(timeout=HANG_S),
          match=r"boom: Target.boom raises", label="boom.choose()"),
        V(lambda env: [f.get(timeout=HANG_S) for f in env.actors.boom.stream()],
          match=r"boom: Target.boom raises", label="boom.stream()"),
        V(lambda env: env.one.two.call_one(None, None).get(timeout=HANG_S),
          match=r"unsupported operand type\(s\) for \+: 'NoneType' and 'NoneType'",
          label="two.call_one(None, None)"),
        V(lambda env: Accumulator(env.actors.boom, 0, max).accumulate().get(timeout=HANG_S),
          match=r"boom: Target.boom raises", label="Accumulator(boom).accumulate()"),
    ], ActorError)
    add("adverbs", "stopped / failed actors", lambda env, v: v(env), [
        V(lambda env: env.stopped_actors().ping.call().get(timeout=HANG_S),
          match=r"stopped by ActorMesh.stop\(\)", label="stopped.call()"),
        V(lambda env: env.stopped_actors().slice(gpu=0).ping.call_one().get(timeout=HANG_S),
          match=r"stopped by ActorMesh.stop\(\)", label="stopped.call_one()"),
        V(lambda env: env.stopped_actors().ping.choose().get(timeout=HANG_S),
          match=r"stopped by ActorMesh.stop\(\)", label="stopped.choose()"),
        V(lambda env: env.stopped_actors().ping.broadcast(),
          match=r"stopped by ActorMesh.stop\(\)", label="stopped.broadcast()"),
        V(lambda env: _consume(env.stopped_actors().ping.stream()),
          match=r"stopped by ActorMesh.stop\(\)", label="stopped.stream()"),
        V(lambda env: env.failed_actors().ping.call().get(timeout=HANG_S),
          match=r"badinit.*(BadInit's constructor raises|constructor of actor)",
          label="failed.call()"),
        V(lambda env: env.failed_actors().slice(gpu=1).ping.call_one().get(timeout=HANG_S),
          match=r"badinit", label="failed.call_one()"),
        V(lambda env: env.failed_actors().ping.choose().get(timeout=HANG_S),
          match=r"badinit", label="failed.choose()"),
        V(lambda env: env.failed_actors().ping.broadcast(), match=r"badinit",
          label="failed.broadcast()"),
        V(lambda env: [f.get(timeout=HANG_S) for f in env.failed_actors().ping.stream()],
          match=r"badinit", label="failed.stream()"),
    ], SE)

    # -- futures ----------------------------------------------------------------------------
    timeouts = [
        V("x", TE, r"timeout.*seconds.*got str"),
        V("1", TE, r"timeout.*seconds.*got str"),
        V(b"1", TE, r"timeout.*seconds.*got bytes"),
        V([1], TE, r"timeout.*seconds.*got list"),
        V(L(lambda env: object(), "object()"), TE, r"timeout.*seconds.*got object"),
        V(1j, TE, r"timeout.*seconds.*got complex"),
        V(True, TE, r"timeout.*seconds.*got bool"),
        V(-1, VE, r"timeout must be non-negative.*got -1"),
        V(-0.5, VE, r"timeout must be non-negative.*got -0.5"),
        V(-math.inf, VE, r"timeout must be non-negative.*got -inf"),
        V(math.nan, VE, r"timeout must be non-negative.*got nan"),
        V(-(10**30), VE, r"timeout must be non-negative"),
    ]
    futures = [
        ("pending", lambda env: env.pending()),
        ("ready", lambda env: Future.ready(1)),
        ("actor reply", lambda env: env.actor_future()),
        ("fetch[c]", lambda env: env.fetch_future("c")),
        ("fetch[sim]", lambda env: env.fetch_future("sim")),
    ]
    for name, make in futures:
        add("futures", f"Future.get(timeout)[{name}]",
            lambda env, v, make=make: make(env).get(timeout=v), timeouts)
    for name, make in futures[:3:2]:
        add("futures", f"Future.exception(timeout)[{name}]",
            lambda env, v, make=make: make(env).exception(timeout=v), timeouts)
        add("futures", f"Future.result(timeout)[{name}]",
            lambda env, v, make=make: make(env).result(v), timeouts)
    add("futures", "Future.then(fn)", lambda env, v: v[1](env).then(v[0]), [
        V((5, futures[1][1]), label="ready.then(5)"),
        V((None, futures[1][1]), label="ready.then(None)"),
        V(("f", futures[2][1]), label="reply.then('f')"),
        V(([len], futures[2][1]), label="reply.then([len])"),
        V((5, futures[0][1]), label="pending.then(5)"),
    ], TE, r"then takes a callable")

    # -- channels, ports, helpers ------------------------------------------------------------
    add("channels", "send / Port / PortReceiver", lambda env, v: v(env), [
        V(lambda env: send(5), TE, r"send takes an endpoint .*got 5", "send(5)"),
        V(lambda env: send(None), TE, r"send takes an endpoint", "send(None)"),
        V(lambda env: send(env.actors), TE, r"send takes an endpoint", "send(actors)"),
        V(lambda env: send(env.actors.ping, [1]), TE, r"send's args is a tuple, got list",
          "send(ep, [1])"),
        V(lambda env: send(env.actors.ping, (1,), [("x", 1)]), TE,
          r"send's kwargs is a dict, got list", "send(ep, kwargs=list)"),
        V(lambda env: send(env.actors.ping, (), None, "port"), TE, r"send's port is a Port",
          "send(ep, port='port')"),
        V(lambda env: send(env.actors.ping, (), None, env.receiver), TE,
          r"send's port is a Port", "send(ep, port=receiver)"),
        V(lambda env: send(env.actors.ping, selection="one"), VE,
          r"send's selection is 'all' or 'choose', got 'one'", "send(selection='one')"),
        V(lambda env: send(env.actors.ping, selection=None), VE, r"selection is 'all'",
          "send(selection=None)"),
        V(lambda env: send(env.actors.ping, (threading.Lock(),)), TE, r"cannot pickle",
          "send(ep, (Lock(),))"),
        V(lambda env: send(env.actors.plain), TE, r"send takes an endpoint", "send(plain)"),
        V(lambda env: Port(5, 5), TE, r"a Port is made by Channel.open\(\)", "Port(5, 5)"),
        V(lambda env: Port("", 1), TE, r"a Port is made by Channel.open\(\)", "Port('', 1)"),
        V(lambda env: Port("a", "1"), TE, r"a Port is made by Channel.open\(\)",
          "Port('a', '1')"),
        V(lambda env: env.port.exception("x"), TE, r"Port.exception takes an exception, got 'x'",
          "port.exception('x')"),
        V(lambda env: env.port.exception(ValueError), TE, r"Port.exception takes an exception",
          "port.exception(ValueError)"),
        V(lambda env: env.port.send(threading.Lock()), TE, r"cannot pickle '_thread.lock'",
          "port.send(Lock())"),
        V(lambda env: pickle.dumps(env.receiver), TE, r"PortReceiver stays in the process",
          "pickle(receiver)"),
        V(lambda env: env.pending().get(timeout=0.05), TimeoutError,
          r"no result within 0.05 s", "recv().get(timeout=0.05)"),
        V(lambda env: _once_twice(), RuntimeError, r"recv\(\) on a once port .*takes one message",
          "once port, second recv"),
    ])
    add("channels", "endpoint helpers", lambda env, v: v(env), [
        V(lambda env: endpoint(5), TE, r"@endpoint decorates a method, got 5", "endpoint(5)"),
        V(lambda env: endpoint("x"), TE, r"@endpoint decorates a method, got 'x'",
          "endpoint('x')"),
        V(lambda env: concurrent_endpoint(_sync_method), VE,
          r"can only wrap async endpoints \('_sync_method' is not async def\)",
          "concurrent_endpoint(sync)"),
        V(lambda env: concurrent_endpoint(endpoint(_async_method)), VE,
          r"does not wrap @endpoint", "concurrent_endpoint(@endpoint)"),
        V(lambda env: concurrent_endpoint(5), VE, r"can only wrap async endpoints",
          "concurrent_endpoint(5)"),
        V(lambda env: Accumulator(5, 0, max), TE, r"Accumulator takes an endpoint",
          "Accumulator(5)"),
        V(lambda env: Accumulator(env.actors, 0, max), TE, r"Accumulator takes an endpoint",
          "Accumulator(actors)"),
        V(lambda env: Accumulator(env.actors.ping, 0, 5), TE,
          r"Accumulator takes a combine function.*got 5", "Accumulator(ep, 0, 5)"),
        V(lambda env: as_endpoint(5), VE, r"as_endpoint takes a method .*got 5", "as_endpoint(5)"),
        V(lambda env: as_endpoint(env.actors.ping), VE, r"as_endpoint takes a method",
          "as_endpoint(endpoint)"),
        V(lambda env: as_endpoint(env.actors.plain, explicit_response_port="yes"), TE,
          r"explicit_response_port must be a bool, got str",
          "as_endpoint(explicit_response_port='yes')"),
    ])
    for be in BACKENDS:
        add("actors", f"ProcMesh.logging_option[{be}]",
            lambda env, v, be=be: env.tm[be].mesh.logging_option(**v), _kws([
                ("aggregate_window_sec=-1", VE, r"aggregate_window_sec must be >= 0 or None"),
                ("aggregate_window_sec='3'", TE, r"aggregate_window_sec .*got str"),
                ("aggregate_window_sec=[3]", TE, r"aggregate_window_sec .*got list"),
                ("level='INFO'", TE, r"level takes a logging level \(an int\), got str"),
                ("level=None", TE, r"level takes a logging level .*got NoneType"),
                ("level=1.5", TE, r"level takes a logging level .*got float"),
            ]))

    # -- value meshes, extents, points ----------------------------------------------------
    add("values", "ValueMesh.item", lambda env, v: env.vm.item(**v), _kws([
        ("host=0, gpu=5", IE, r"coordinate gpu=5 out of range \(size 2\)"),
        ("host=0, gpu=-1", IE, r"coordinate gpu=-1 out of range"),
        ("host=0, gpu=10**12", IE, r"out of range"),
        ("foo=0", KE, r"no dimension \['foo'\]"),
        ("", KE, r"item\(\) needs a coordinate for dimension 'host'"),
        ("host=0", KE, r"needs a coordinate for dimension 'gpu'"),
        ("host=0, gpu='x'", TE, r"coordinate of 'gpu' must be an int, got str"),
        ("host=0, gpu=1.7", TE, r"coordinate of 'gpu' must be an int, got float"),
        ("host=0, gpu=None", TE, r"coordinate of 'gpu' must be an int, got NoneType"),
        ("host=0, gpu=True", TE, r"coordinate of 'gpu' must be an int, got bool"),
        ("host=0, gpu=[1]", TE, r"coordinate of 'gpu' must be an int, got list"),
    ]))
    add("values", "ValueMesh.get", lambda env, v: env.vm.get(v), [
        V(-1, IE, r"rank -1 out of range for a value mesh of 4"),
        V(4, IE, r"rank 4 out of range"), V(10**12, IE, r"out of range"),
        V("0", TE, r"rank must be an int, got str"), V(None, TE, r"rank must be an int"),
        V(1.5, TE, r"rank must be an int, got float"), V(True, TE, r"got bool"),
    ])
    add("values", "ValueMesh(...)", lambda env, v: ValueMesh(*v), [
        V((["a"], [2], [1]), VE, r"a value mesh of \{a=2\} needs 2 values, got 1"),
        V((["a", "a"], [1, 1], [1]), VE, r"duplicate mesh dimension 'a'"),
        V(([5], [1], [1]), TE, r"names must be str, got int"),
        V((["a"], ["1"], [1]), TE, r"'a' must have an int size, got str"),
    ])
    add("values", "ValueMesh from a call", lambda env, v: v(
        env.actors.ping.call(3).get(timeout=HANG_S)), [
        V(lambda vm: vm.item(gpu=9), IE, r"coordinate gpu=9 out of range", "item(gpu=9)"),
        V(lambda vm: vm.item(host=0), KE, r"needs a coordinate for dimension 'gpu'",
          "item(host=0)"),
        V(lambda vm: vm.slice(gpu=2), IE, r"index 2 out of range", "slice(gpu=2)"),
        V(lambda vm: vm.get(2), IE, r"rank 2 out of range", "get(2)"),
    ])
    ex = lambda env: env.extent  # noqa: E731
    add("values", "Extent / Point", lambda env, v: v(env), [
        V(lambda env: Extent(["a"], [1, 2]), VE, r"one size per label: 1 labels, 2 sizes",
          "Extent(['a'], [1, 2])"),
        V(lambda env: Extent([1], [2]), TE, r"labels must be str, got int", "Extent([1], [2])"),
        V(lambda env: Extent(["a", "a"], [1, 1]), VE, r"labels must be distinct",
          "Extent(['a','a'], ...)"),
        V(lambda env: Extent(["a"], [-1]), TE, r"'a' must be a non-negative int, got -1",
          "Extent(['a'], [-1])"),
        V(lambda env: Extent(["a"], ["1"]), TE, r"non-negative int, got '1'",
          "Extent(['a'], ['1'])"),
        V(lambda env: Extent(["a"], [True]), TE, r"non-negative int, got True",
          "Extent(['a'], [True])"),
        V(lambda env: Extent("ab", [1, 2]), TE, r"Extent labels .*list.*got str",
          "Extent('ab', [1, 2])"),
        V(lambda env: Extent(5, 5), TE, r"Extent labels .*got int", "Extent(5, 5)"),
        V(lambda env: ex(env)["c"], KE, r"Dimension 'c' not found \(dimensions: a, b\)",
          "extent['c']"),
        V(lambda env: ex(env).coordinates(6), IE, r"rank 6 out of range for extent",
          "coordinates(6)"),
        V(lambda env: ex(env).coordinates(-1), IE, r"rank -1 out of range", "coordinates(-1)"),
        V(lambda env: ex(env).coordinates("x"), TE, r"rank must be an int, got str",
          "coordinates('x')"),
        V(lambda env: ex(env).rank_of([5, 0]), IE, r"coordinate a=5 out of range",
          "rank_of([5, 0])"),
        V(lambda env: ex(env).rank_of([]), VE, r"rank_of needs 2 coordinates, got 0",
          "rank_of([])"),
        V(lambda env: ex(env).rank_of([0, 0, 0]), VE, r"rank_of needs 2 coordinates, got 3",
          "rank_of([0, 0, 0])"),
        V(lambda env: ex(env).rank_of([0, "1"]), TE, r"coordinate of 'b' must be an int",
          "rank_of([0, '1'])"),
        V(lambda env: Point(6, ex(env)), IE, r"rank 6 out of range", "Point(6, extent)"),
        V(lambda env: Point(0, {"a": 1}), TE, r"Point needs an Extent, got dict",
          "Point(0, dict)"),
        V(lambda env: Point("x", ex(env)), TE, r"rank must be an int, got str",
          "Point('x', extent)"),
        V(lambda env: Point(0, ex(env))["z"], KE, r"Dimension 'z' not found", "point['z']"),
        V(lambda env: Point(0, ex(env)).size("z"), KE, r"Dimension 'z' not found",
          "point.size('z')"),
    ])

    # -- tensors ------------------------------------------------------------------------------
    for be in BACKENDS:
        def under(fn: Callable[[TensorMesh, Any], Any], be: str = be) -> Callable:
            def run(env: Env, v: Any) -> Any:
                M = env.tm[be]
                with M.mesh.activate():
                    return fn(M, v)
            return run

        add("tensors", f"Tensor.reduce(dims)[{be}]", under(lambda M, v: M.t.reduce(v)), [
            V("foo", KE, r"no dimension 'foo' \(dimensions: host, gpu\)"),
            V("", KE, r"no dimension ''"),
            V(("gpu", "gpu"), VE, r"dimension 'gpu' named twice"),
            V(["host", "host"], VE, r"dimension 'host' named twice"),
            V(("gpu", "foo"), KE, r"no dimension 'foo'"),
            V(5, TE, r"dimension name.*got int"),
            V([5], TE, r"dims must be names \(str\), got int"),
            V(None, TE, r"dimension name.*got NoneType"),
            V(b"gpu", TE, r"dimension name.*got bytes"),
            V(L(lambda env: object(), "object()"), TE, r"dimension name.*got object"),
            V(1.5, TE, r"dimension name.*got float"),
        ])
        add("tensors", f"Tensor.reduce(reduction)[{be}]",
            under(lambda M, v: M.t.reduce("gpu", v)),
            ["mean", "", 5, None, "SUM", ["sum"], "stack "], VE,
            r"unknown reduction .* \(one of sum, avg, min, max, product, stack\)")
        add("tensors", f"Tensor.reduce (rules)[{be}]", under(lambda M, v: v(M)), [
            V(lambda M: M.t.reduce(("host", "gpu"), "stack"), VE,
              r"stack reduces over one dimension, got 2 \(host, gpu\)", "stack over 2 dims"),
            V(lambda M: M.t.reduce((), "stack"), VE, r"stack reduces over one dimension, got 2",
              "stack over ()"),
            V(lambda M: M.t.reduce(("host", "gpu"), scatter=True), VE,
              r"scatter reduces over one dimension", "scatter over 2 dims"),
            V(lambda M: M.t.reduce("gpu", scatter=True), VE,
              r"leading size to equal the 2 ranks reduced over, got shape \(4, 3\)",
              "scatter, leading 4"),
            V(lambda M: M.z.reduce("gpu", scatter=True), VE, r"leading size .* got shape \(\)",
              "scatter of 0-d"),
            V(lambda M: M.v3.reduce("gpu", "stack", scatter=True), VE,
              r"leading size to be a multiple of 2, got shape \(3,\)", "stack+scatter, leading 3"),
            V(lambda M: M.t.reduce_("gpu", scatter=True), VE,
              r"reduce_ \(in place\) cannot scatter", "reduce_ scatter"),
            V(lambda M: M.t.reduce_("gpu", "stack"), VE, r"reduce_ \(in place\) cannot stack",
              "reduce_ stack"),
            V(lambda M: M.t.reduce("gpu", out=M.s), VE,
              r"out= has shape \(2, 3\) .* the result has shape \(4, 3\)", "out wrong shape"),
            V(lambda M: M.t.reduce("gpu", out=M.i), VE, r"out= .*dtype torch.int64",
              "out wrong dtype"),
            V(lambda M: M.t.reduce("gpu", out=M.local), MUE,
              r"LOCAL_TENSOR: reduce out= must be a distributed tensor", "out local"),
            V(lambda M: M.t.reduce("gpu", out=5), MUE, r"LOCAL_TENSOR: reduce out=", "out=5"),
            V(lambda M: M.t.reduce("gpu", out=M.sliced), MUE, r"WRONG_MESH", "out other mesh"),
            V(lambda M: M.g.reduce("gpu"), MUE, r"REQUIRES_GRAD: reduce of a tensor that requires",
              "requires grad"),
            V(lambda M: monarch.reduce(M.local, "gpu"), MUE,
              r"LOCAL_TENSOR: reduce of a local tensor", "monarch.reduce(local)"),
        ])
        add("tensors", f"monarch.reduce(pytree)[{be}]", under(lambda M, v: v(M)), [
            V(lambda M: monarch.reduce({"a": M.t}, "foo"), KE, r"no dimension 'foo'",
              "reduce({'a': t}, 'foo')"),
            V(lambda M: monarch.reduce([M.t, M.local], "gpu"), MUE, r"LOCAL_TENSOR",
              "reduce([t, local])"),
            V(lambda M: monarch.reduce(M.t, "gpu", "mean"), VE, r"unknown reduction 'mean'",
              "reduce(t, 'gpu', 'mean')"),
            V(lambda M: monarch.reduce_({"a": [M.t]}, "gpu", scatter=True), VE,
              r"cannot scatter", "reduce_(scatter=True)"),
            V(lambda M: monarch.reduce_([M.g], "gpu"), MUE, r"REQUIRES_GRAD", "reduce_([g])"),
        ])
        add("tensors", f"Tensor.to_mesh(dest)[{be}]", under(lambda M, v: M.t.to_mesh(v)), [
            V(5, TE, r"to_mesh takes a ProcMesh \(or a view of one\), not int"),
            V(None, TE, r"to_mesh takes a ProcMesh .*not NoneType"),
            V("mesh", TE, r"to_mesh takes a ProcMesh .*not str"),
            V(L(lambda env: [env.sim], "[mesh]"), TE, r"to_mesh takes a ProcMesh .*not list"),
            V(L(lambda env, be=be: env.tm[be].t, "a tensor"), TE,
              r"to_mesh takes a ProcMesh .*not DTensor"),
            V(L(lambda env: env.actors, "ActorMesh"), TE,
              r"to_mesh takes a ProcMesh .*not ActorMesh"),
            V(L(lambda env: env.vm, "ValueMesh"), TE, r"to_mesh takes a ProcMesh .*not ValueMesh"),
            V(L(lambda env: this_host(), "this_host()"), TE,
              r"to_mesh takes a ProcMesh .*HostMesh"),
            V(L(lambda env: env.sim2, "mesh of another spawn_procs"), MUE,
              r"WRONG_MESH: to_mesh between meshes of different spawn_procs"),
            V(L(lambda env, be=be: env.tm[be].mesh.slice(gpu=0), "mesh.slice(gpu=0)"), VE,
              r"source dim 'gpu' is not in the destination"),
            V(L(lambda env, be=be: env.tm[be].mesh.slice(gpu=slice(0, 1)),
                "mesh.slice(gpu=0:1)"), VE,
              r"source dim 'gpu' has size 2 but size 1 in the destination"),
            V(L(lambda env, be=be: env.tm[be].mesh.rename(gpu="g"), "mesh.rename(gpu='g')"), VE,
              r"source dim 'gpu' is not in the destination"),
        ])
        add("tensors", f"Tensor.to_mesh (grad)[{be}]", under(lambda M, v: M.g.to_mesh(M.mesh)),
            [V(0, label="g.to_mesh(mesh)")], MUE, r"REQUIRES_GRAD: to_mesh")
        add("tensors", f"Tensor.slice_mesh(coords)[{be}]", under(lambda M, v: M.t.slice_mesh(**v)),
            _kws([
                ("gpu=2", IE, r"index 2 out of range for dimension 'gpu'"),
                ("hosts=0", KE, r"no dimension 'hosts'"),
                ("foo=0", KE, r"no dimension 'foo'"),
                ("gpu='0'", TE, r"'gpu' takes an int or a slice, got str"),
                ("gpu=1.5", TE, r"got float"),
                ("gpu=None", TE, r"got NoneType"),
                ("gpu=True", TE, r"got bool"),
                ("gpu=slice(0, 0)", IE, r"range 0:0 out of range"),
                ("gpu=slice(0.5, 1)", TE, r"slice of dimension 'gpu' .*int.*got float"),
            ]))
        add("tensors", f"fetch_shard(t, coords)[{be}]",
            lambda env, v, be=be: monarch.fetch_shard(env.tm[be].t, *v[0], **v[1]), [
                V(((), _kw(t)), e, m, t) for t, e, m in [
                    ("gpu=2", IE, r"coordinate 2 is out of range for dim 'gpu' of size 2"),
                    ("gpu=-1", IE, r"coordinate -1 is out of range"),
                    ("gpu=10**12", IE, r"coordinate 1000000000000 is out of range"),
                    ("host=5", IE, r"coordinate 5 is out of range for dim 'host'"),
                    ("hosts=0", KE, r"no dimension 'hosts' \(dimensions: host, gpu\)"),
                    ("gpus=0", KE, r"no dimension 'gpus'"),
                    ("gpu='0'", TE, r"coordinate of 'gpu' must be an int, got str"),
                    ("gpu=1.5", TE, r"coordinate of 'gpu' must be an int, got float"),
                    ("gpu=None", TE, r"got NoneType"),
                    ("gpu=True", TE, r"got bool"),
                ]] + [
                V(((5,), {}), TE, r"fetch_shard takes coordinates as a dict.*got int", "coords=5"),
                V((("gpu",), {}), TE, r"coordinates as a dict.*got str", "coords='gpu'"),
                V((([1],), {}), TE, r"coordinates as a dict.*got list", "coords=[1]"),
                V((({"gpu": 5},), {}), IE, r"coordinate 5 is out of range", "coords={'gpu': 5}"),
                V((({"foo": 0},), {}), KE, r"no dimension 'foo'", "coords={'foo': 0}"),
                V((({0: 0},), {}), TE, r"dimension.*str.*got int", "coords={0: 0}"),
            ])
        add("tensors", f"inspect/show(t, coords)[{be}]", lambda env, v, be=be: v(env.tm[be].t), [
            V(lambda t: monarch.inspect(t, gpu=9), IE, r"coordinate 9 is out of range",
              "inspect(t, gpu=9)"),
            V(lambda t: monarch.show(t, gpu=9), IE, r"coordinate 9 is out of range",
              "show(t, gpu=9)"),
            V(lambda t: monarch.inspect(t, host="x"), TE, r"coordinate of 'host' must be an int",
              "inspect(t, host='x')"),
            V(lambda t: monarch.show(t, hosts=0), KE, r"no dimension 'hosts'",
              "show(t, hosts=0)"),
        ])
        add("tensors", f"stopped mesh[{be}]", lambda env, v, be=be: v(env.stopped(be)), [
            V(lambda S: S.t + 1, label="t + 1"),
            V(lambda S: _under(S.mesh, lambda: torch.ones(2)), label="torch.ones under activate"),
            V(lambda S: _under(S.mesh, lambda: S.t.sum()), label="t.sum() under activate"),
            V(lambda S: monarch.fetch_shard(S.t), label="fetch_shard(t)"),
            V(lambda S: monarch.inspect(S.t), label="inspect(t)"),
            V(lambda S: S.mesh.rank("gpu"), label="mesh.rank('gpu')"),
            V(lambda S: S.t.reduce("gpu"), label="t.reduce('gpu')"),
            V(lambda S: S.t.add_(1), label="t.add_(1)"),
        ], SE, r"the mesh is stopped \(ProcMesh.stop\(\)\)")
        add("tensors", f"misuse[{be}]", under(lambda M, v: v(M)), [
            V(lambda M: M.t + M.local, MUE, r"LOCAL_TENSOR: aten::add.Tensor mixes a local tensor",
              "t + local"),
            V(lambda M: torch.mm(M.local, M.t.T), MUE, r"LOCAL_TENSOR: aten::mm", "mm(local, t)"),
            V(lambda M: M.sliced + 1, MUE, r"WRONG_MESH: aten::add.Tensor uses a tensor on mesh",
              "sliced + 1"),
            V(lambda M: _wrong_stream(M), MUE, r"WRONG_STREAM: .*owned by stream 'bad_side'",
              "tensor of another stream"),
            V(lambda M: _borrowed(M, True, lambda o, r, b: o + 1), MUE,
              r"BORROWED: .*mutably borrowed onto stream 'bad_side'", "origin of a mutable borrow"),
            V(lambda M: _borrowed(M, True, lambda o, r, b: monarch.fetch_shard(o)), MUE,
              r"BORROWED: fetch_shard", "fetch the origin of a mutable borrow"),
            V(lambda M: _dropped(M), MUE, r"DROPPED: .*after its borrow was dropped",
              "borrowed tensor after drop"),
            V(lambda M: _borrowed(M, False, lambda o, r, b: r.add_(1), on_side=True), MUE,
              r"MUTATING_BORROW: .*read-only borrow", "write a read-only borrow"),
            V(lambda M: _borrowed(M, False, lambda o, r, b: o.add_(1)), MUE,
              r"MUTATING_BORROW: .*borrowed read-only", "write the origin of a ro borrow"),
            V(lambda M: _borrowed(M, False, lambda o, r, b: monarch.Stream("bad_side2").borrow(
                o, mutable=True)), MUE, r"MUTATING_BORROW: mutable borrow of a tensor that is "
              r"borrowed read-only", "mutable borrow of a ro-borrowed tensor"),
            V(lambda M: monarch.Stream("bad_side").borrow(M.g), MUE,
              r"REQUIRES_GRAD: borrow of a tensor that requires grad", "borrow(g)"),
            V(lambda M: monarch.get_active_stream().borrow(M.t), MUE,
              r"WRONG_STREAM: borrow onto stream 'main', which already owns it",
              "borrow onto the owner"),
            V(lambda M: monarch.Stream("bad_side").borrow(M.local), MUE,
              r"LOCAL_TENSOR: borrow of a local tensor", "borrow(local)"),
            V(lambda M: monarch.Stream("bad_side").borrow(5), MUE,
              r"LOCAL_TENSOR: borrow of an? int", "borrow(5)"),
        ])
        add("tensors", f"values on the controller[{be}]", under(lambda M, v: v(M)), [
            V(lambda M: bool(M.t), RuntimeError, r"lives on the workers: use monarch.inspect",
              "bool(t)"),
            V(lambda M: 1 if M.z else 0, RuntimeError, r"lives on the workers", "if t:"),
            V(lambda M: M.z.item(), RuntimeError, r"_local_scalar_dense .*use monarch.inspect",
              "t.item()"),
            V(lambda M: float(M.z), RuntimeError, r"use monarch.inspect", "float(t)"),
            V(lambda M: int(M.z), RuntimeError, r"use monarch.inspect", "int(t)"),
            V(lambda M: M.t.tolist(), RuntimeError, r"tolist\(\) is not supported", "t.tolist()"),
            V(lambda M: M.t.numpy(), RuntimeError, r"numpy\(\) is not supported", "t.numpy()"),
            V(lambda M: pickle.dumps(M.t), TE, r"distributed tensors cannot be pickled",
              "pickle.dumps(t)"),
            V(lambda M: copy.copy(M.t), TE, r"distributed tensors cannot be pickled",
              "copy.copy(t)"),
        ])
        add("tensors", f"torch errors at the call[{be}]", under(lambda M, v: v(M)), [
            # torch's own message, which names the shapes in its version's words
            # (1.x: "mat1 and mat2 shapes cannot be multiplied (4x3 and 4x3)"; 2.x's
            # meta kernel: "a and b must have same reduction dim, but got [4, 3] X [4, 3]").
            V(lambda M: M.t @ M.t, RuntimeError,
              r"shapes cannot be multiplied \(4x3 and 4x3\)|"
              r"same reduction dim, but got \[4, 3\] X \[4, 3\]", "t @ t"),
            V(lambda M: torch.ones(-1), RuntimeError, r"negative dimension -1", "ones(-1)"),
            V(lambda M: M.t.view(5), RuntimeError, r"shape '\[5\]' is invalid for input of size 12",
              "t.view(5)"),
            V(lambda M: M.t + torch.ones(5, 5), RuntimeError,
              r"size of tensor a \(3\) must match the size of tensor b \(5\)", "t + ones(5, 5)"),
            V(lambda M: M.t.sum(dim=5), IE, r"Dimension out of range", "t.sum(dim=5)"),
            V(lambda M: M.t[10], IE, r"index 10 is out of bounds for dimension 0 with size 4",
              "t[10]"),
            V(lambda M: torch.cat([M.t, M.s.T], dim=0), RuntimeError,
              r"Sizes of tensors must match", "cat(mismatched)"),
            V(lambda M: M.t.to("nodevice"), RuntimeError, r"device string: nodevice",
              "t.to('nodevice')"),
        ])
        add("tensors", f"monarch.grad_generator[{be}]",
            under(lambda M, v: _consume(monarch.grad_generator(*v(M)))), [
                V(lambda M: (5, [M.g]), TE, r"grad_generator takes the loss as a tensor.*got int",
                  "(5, [g])"),
                V(lambda M: (None, [M.g]), TE, r"loss as a tensor.*got NoneType", "(None, [g])"),
                V(lambda M: (M.gloss, [5]), TE,
                  r"grad_generator's params must be tensors, got int at position 0",
                  "(loss, [5])"),
                V(lambda M: (M.gloss, [M.g, "w"]), TE, r"params must be tensors, got str at "
                  r"position 1", "(loss, [g, 'w'])"),
                V(lambda M: (M.gloss, 5), TE, r"params .*sequence of tensors.*got int",
                  "(loss, 5)"),
                V(lambda M: (M.z, [M.t]), RuntimeError,
                  r"does not require grad and does not have a grad_fn", "(no-grad loss, [t])"),
            ])
        add("tensors", f"monarch.compile (fetch inside)[{be}]",
            under(lambda M, v: monarch.compile(lambda x: monarch.fetch_shard(x).get())(M.t)),
            [V(0, label="step that calls get()")], MUE, r"GET_IN_COMPILED_STEP: get\(\) of a value "
            r"fetched inside a compiled step")
        add("tensors", f"monarch.range(mesh=)[{be}]",
            lambda env, v, be=be: _consume(monarch.range(3, mesh=v(env))), [
                V(lambda env: "mesh", TE, r"monarch.range.*mesh.*ProcMesh.*got str", "'mesh'"),
                V(lambda env: 5, TE, r"mesh.*got int", "5"),
                V(lambda env: env.actors, TE, r"mesh.*got ActorMesh", "ActorMesh"),
                V(lambda env, be=be: env.tm[be].t, TE, r"mesh.*got DTensor", "a tensor"),
            ])

    add("tensors", "inspect / show / fetch_shard (not a tensor)", lambda env, v: v[0](v[1](env)),
        [V((fn, make), MUE, rx, f"{name}({what})")
         for name, fn in (("inspect", monarch.inspect), ("show", monarch.show),
                          ("fetch_shard", monarch.fetch_shard))
         for what, make, rx in (
             ("5", lambda env: 5, r"LOCAL_TENSOR: fetch_shard of an int"),
             ("None", lambda env: None, r"fetch_shard of a NoneType"),
             ("'x'", lambda env: "x", r"fetch_shard of a str"),
             ("1.5", lambda env: 1.5, r"fetch_shard of a float"),
             ("[t]", lambda env: [env.tm["sim"].t], r"fetch_shard of a list"),
             ("{'a': t}", lambda env: {"a": env.tm["sim"].t}, r"fetch_shard of a dict"),
             ("local tensor", lambda env: env.tm["sim"].local, r"fetch_shard of a local tensor"),
             ("ProcMesh", lambda env: env.sim, r"fetch_shard of a ProcMesh"),
             ("ActorMesh", lambda env: env.actors, r"fetch_shard of an? ActorMesh"),
             ("Future", lambda env: Future.ready(1), r"fetch_shard of a Future"),
             ("nn.Linear", lambda env: torch.nn.Linear(2, 2), r"fetch_shard of a Linear"),
             ("t.shape", lambda env: env.tm["sim"].t.shape, r"fetch_shard of a Size"),
         )])
    add("tensors", "get_active_mesh / no_mesh", lambda env, v: v(env), [
        V(lambda env: monarch.get_active_mesh(), label="get_active_mesh()"),
        V(lambda env: _no_mesh(monarch.get_active_mesh), label="no_mesh: get_active_mesh()"),
        V(lambda env: _under(env.sim, lambda: _no_mesh(monarch.get_active_mesh)),
          label="activate + no_mesh: get_active_mesh()"),
    ], VE, r"no device mesh is active \(use `with mesh.activate\(\):`\)")
    add("tensors", "monarch.Stream(name)", lambda env, v: monarch.Stream(v), [
        V(5, TE, r"a stream's name must be a str, not int"), V(None, TE, r"not NoneType"),
        V(b"x", TE, r"not bytes"), V(["x"], TE, r"not list"), V(1.5, TE, r"not float"),
        V(L(lambda env: object(), "object()"), TE, r"not object"),
        V("", VE, r"a stream needs a non-empty name"),
    ])
    add("tensors", "monarch.compile(fn)", lambda env, v: monarch.compile(v), [
        5, None, "step", [], L(lambda env: object(), "object()"), 1.5,
    ], TE, r"compile takes a function")
    add("tensors", "monarch.compile(step)(args)", lambda env, v: v(env), [
        V(lambda env: monarch.compile(lambda x: x)(1, 2), TE,
          r"takes 1 positional argument but 2 were given", "(x)(1, 2)"),
        V(lambda env: monarch.compile(lambda x: x)(), TE, r"missing 1 required positional",
          "(x)()"),
        V(lambda env: monarch.compile(lambda x: x)(y=1), TE, r"unexpected keyword argument 'y'",
          "(x)(y=1)"),
    ])
    add("tensors", "monarch.trace(fn)", lambda env, v: monarch.trace(v), [
        5, None, "prog.py", L(lambda env: object(), "object()"),
    ], TE, r"trace takes a function")
    add("tensors", "monarch.range(...)", lambda env, v: _consume(monarch.range(*v)), [
        V((), TE, r"takes 1 to 3 ints, got \(\)"),
        V((1, 2, 3, 4), TE, r"takes 1 to 3 ints, got \(1, 2, 3, 4\)"),
        V(("5",), TE, r"takes 1 to 3 ints, got \('5',\)"),
        V((1.5,), TE, r"takes 1 to 3 ints, got \(1.5,\)"),
        V((True,), TE, r"takes 1 to 3 ints, got \(True,\)"),
        V((None,), TE, r"takes 1 to 3 ints"),
        V((0, 10, 0), VE, r"range\(\) arg 3 must not be zero"),
        V((0, 10, -1), VE, r"monarch.range: the step must be positive, got -1"),
        V((10, 0, -2), VE, r"the step must be positive, got -2"),
        V((3,), RuntimeError, r"monarch.range needs a mesh for its step tensor"),
    ])
    add("tensors", "monarch.remote(fn)", lambda env, v: v(env), [
        V(lambda env: monarch.remote(5), TE, r"remote takes a function or its import path, got 5",
          "remote(5)"),
        V(lambda env: monarch.remote("not a path"), VE,
          r"remote takes a function or its import path 'pkg.module.fn', got 'not a path'",
          "remote('not a path')"),
        V(lambda env: monarch.remote(object()), TE, r"remote takes a function", "remote(object())"),
        V(lambda env: monarch.remote(_sync_method, propagate="x"), VE,
          r"propagate must be a callable, 'cached', 'inspect' or None, not 'x'", "propagate='x'"),
        V(lambda env: monarch.remote(_sync_method, propagate=5), TE,
          r"propagate must be a callable, 'cached', 'inspect' or None, not 5", "propagate=5"),
        V(lambda env: monarch.remote(propagate="nope")(_sync_method), VE,
          r"propagate must be .* not 'nope'", "@remote(propagate='nope')"),
    ])

    # -- monarch.config -------------------------------------------------------------------
    config_bad = [
        ("nope=1", ConfigError, r"no setting 'nope'; the settings are backend, "),
        ("BACKEND='c'", ConfigError, r"no setting 'BACKEND'"),
        ("backend_='c'", ConfigError, r"no setting 'backend_'"),
        ("memory_cap=1", ConfigError, r"no setting 'memory_cap'"),
        ("timeout_ms=5", ConfigError, r"no setting 'timeout_ms'"),
        ("default_transport='tcp'", ConfigError, r"'default_transport' is a Monarch setting"),
        ("enable_file_capture=True", ConfigError, r"'enable_file_capture' is a Monarch setting"),
        ("host_spawn_ready_timeout=5", ConfigError, r"give spawn_procs\(timeout_ms=\.\.\.\)"),
        ("codec_max_frame_length=5", ConfigError, r"Monarch's Rust runtime"),
        ("rdma_allow_tcp_fallback=True", ConfigError, r"rdma_backend='ibverbs'"),
        ("default_encoding='bincode'", ConfigError, r"no choice"),
        ("enable_log_forwarding=False", ConfigError, r"enable_log_forwarding=False is not "
         r"possible here"),
        ("prefix_with_rank=False", ConfigError, r"prefix_with_rank=False is not possible"),
        ("backend='gpu'", VE, r"backend must be one of c, sim; got 'gpu'"),
        ("backend=''", VE, r"backend must be one of c, sim; got ''"),
        ("backend=5", TE, r"backend takes a str, got int"),
        ("tensor_worker='rust'", VE, r"tensor_worker must be one of native, python"),
        ("tensor_worker=['python']", TE, r"tensor_worker takes a str, got list"),
        ("worker_memory_cap=-1", VE, r"worker_memory_cap must be at least 0, got -1"),
        ("worker_memory_cap='1GB'", TE, r"worker_memory_cap takes an int, got str"),
        ("worker_memory_cap=1.5", TE, r"worker_memory_cap takes an int, got float"),
        ("worker_memory_cap=True", TE, r"worker_memory_cap takes an int, got bool"),
        ("worker_memory_cap=2**64", VE, r"worker_memory_cap must be at most"),
        ("heartbeat_interval_ms='5 parsecs'", VE, r"'5 parsecs' is not a duration"),
        ("heartbeat_interval_ms='-1s'", VE, r"'-1s' is not a duration"),
        ("heartbeat_interval_ms=''", VE, r"'' is not a duration"),
        ("heartbeat_interval_ms='1.5s'", VE, r"'1.5s' is not a duration"),
        ("heartbeat_interval_ms=-5", VE, r"heartbeat_interval_ms must be at least 0, got -5"),
        ("heartbeat_interval_ms=[1]", TE, r"takes an int or a duration string, got list"),
        ("heartbeat_interval_ms=10**30", VE, r"heartbeat_interval_ms must be at most"),
        ("unresponsive_timeout_ms='soon'", VE, r"'soon' is not a duration"),
        ("unresponsive_timeout_ms=-1", VE, r"must be at least 0"),
        ("max_procs_per_host=0", VE, r"max_procs_per_host must be at least 1, got 0"),
        ("max_procs_per_host=-1", VE, r"must be at least 1"),
        ("max_procs_per_host='2'", TE, r"max_procs_per_host takes an int, got str"),
        ("bind_cores='yes'", TE, r"bind_cores takes a bool, got str"),
        ("bind_cores=1", TE, r"bind_cores takes a bool, got int"),
        ("log_level='trace'", VE, r"log_level must be one of debug, info, error; got 'trace'"),
        ("log_level='INFO'", VE, r"got 'INFO'"),
        ("log_level=5", TE, r"log_level takes a str, got int"),
        ("rdma_backend='rdma'", VE, r"rdma_backend must be one of auto, ibverbs, tcp, none"),
        ("rdma_backend='TCP'", VE, r"got 'TCP'"),
        ("rdma_disable_ibverbs='no'", TE, r"rdma_disable_ibverbs takes a bool, got str"),
        ("rdma_disable_ibverbs=0", TE, r"takes a bool, got int"),
        ("rdma_timeout_ms='soon'", VE, r"'soon' is not a duration"),
        ("rdma_timeout_ms=-1", VE, r"rdma_timeout_ms must be at least"),
        ("backend='c', nope=2", ConfigError, r"no setting 'nope'"),
        ("backend='sim', log_level='loud'", VE, r"got 'loud'"),
    ]
    add("config", "monarch.config.configure", lambda env, v: _configure(v), _kws(config_bad))
    add("config", "monarch.config.configured", lambda env, v: _configured(v), _kws(config_bad[::6]))
    add("config", "monarch.config.parametrize_config*", lambda env, v: v(env), [
        V(lambda env: mconfig.parametrize_config(), VE, r"needs at least one setting", "()"),
        V(lambda env: mconfig.parametrize_config(nope={1}), ConfigError, r"no setting 'nope'",
          "(nope=)"),
        V(lambda env: mconfig.parametrize_config(backend=5), TE,
          r"parametrize_config takes .*values.*'backend'.*got int", "(backend=5)"),
        V(lambda env: mconfig.parametrize_config_pointwise(), VE, r"needs at least one setting",
          "pointwise()"),
        V(lambda env: mconfig.parametrize_config_pointwise(backend=["c"],
                                                           tensor_worker=["native", "python"]),
          VE, r"sequences of one length", "pointwise(lengths 1, 2)"),
        V(lambda env: mconfig.parametrize_config_pointwise(backend=5), TE,
          r"parametrize_config_pointwise takes .*'backend'.*got int", "pointwise(backend=5)"),
    ])

    # -- RDMA ----------------------------------------------------------------------------------
    add("rdma", "RDMABuffer(memory)", lambda env, v: RDMABuffer(v), [
        V(5, match=r"RDMA needs a torch.Tensor or a buffer .*not int"),
        V("x", match=r"not str"), V(None, match=r"not NoneType"), V([1, 2], match=r"not list"),
        V(1.5, match=r"not float"), V(L(lambda env: object(), "object()"), match=r"not object"),
        V(L(lambda env: torch.empty(0), "empty tensor"), match=r"cannot register empty memory"),
        V(b"", match=r"cannot register empty memory"),
        V(L(lambda env: bytearray(), "bytearray()"), match=r"cannot register empty memory"),
        V(L(lambda env: torch.ones(2, 2), "2-D tensor"), match=r"needs a 1-D tensor, got shape"),
        V(L(lambda env: torch.ones(8)[::2], "strided tensor"), match=r"needs a contiguous tensor"),
        V(L(lambda env: torch.ones(3, device="meta"), "meta tensor"),
          match=r"RDMA of meta tensors is not supported"),
        V(L(lambda env: env.tm["sim"].t.view(-1), "distributed tensor"),
          match=r"distributed tensor|no (host )?memory|storage"),
    ], RDMAError)
    for op in ("read_into", "write_from"):
        mem = [
            V(5, match=r"RDMA needs a torch.Tensor or a buffer .*not int"),
            V(None, match=r"not NoneType"), V("abc", match=r"not str"), V([1], match=r"not list"),
            V(L(lambda env: torch.ones(2, 2), "2-D tensor"), match=r"needs a 1-D tensor"),
            V(L(lambda env: torch.ones(8)[::2], "strided tensor"), match=r"contiguous"),
            V(L(lambda env: torch.ones(100), "400 bytes"),
              match=rf"RDMA {op.split('_')[0]} of 400 bytes at offset 0 exceeds RDMA buffer"),
            V(L(lambda env: env.tm["sim"].t.view(-1), "distributed tensor"),
              match=r"distributed tensor|no (host )?memory|storage"),
        ]
        if op == "read_into":
            mem.append(V(b"abcd", match=r"cannot read into read-only memory"))
        add("rdma", f"RDMABuffer.{op}(memory)",
            lambda env, v, op=op: getattr(env.buf, op)(v).get(timeout=HANG_S), mem, RDMAError)
        add("rdma", f"RDMABuffer.{op}(offset=)",
            lambda env, v, op=op: getattr(env.buf, op)(torch.empty(1), offset=v).get(
                timeout=HANG_S), [
                V(-1, match=r"offset must be a non-negative int.*got -1"),
                V(-(2**63), match=r"offset must be a non-negative"),
                V("x", match=r"offset must be .*int.*got str"),
                V(1.5, match=r"offset .*got float"), V(None, match=r"offset .*got NoneType"),
                V(True, match=r"offset .*got bool"), V([0], match=r"offset .*got list"),
                V(2**64, match=r"offset .*(at most|past|exceeds|too large)"),
                V(2**64 - 1, match=r"of 4 bytes at offset 18446744073709551615 exceeds"),
                V(2**63, match=r"at offset 9223372036854775808 exceeds"),
                V(10**12, match=r"at offset 1000000000000 exceeds RDMA buffer .*\(64 bytes\)"),
                V(64, match=r"at offset 64 exceeds RDMA buffer"),
                V(61, match=r"of 4 bytes at offset 61 exceeds"),
            ], RDMAError)
    add("rdma", "monarch.rdma.submit(ops)", lambda env, v: submit(v(env)).get(timeout=HANG_S), [
        V(lambda env: 5, TE, r"submit takes a list of .*got int", "5"),
        V(lambda env: None, TE, r"submit takes a list of .*got NoneType", "None"),
        V(lambda env: "read", TE, r"submit takes a list of .*got str", "'read'"),
        V(lambda env: [5], TE, r"\(kind, buffer, memory, offset\).*got int", "[5]"),
        V(lambda env: [("read", env.buf)], TE, r"\(kind, buffer, memory, offset\).*2",
          "[('read', buf)]"),
        V(lambda env: [("read", env.buf, torch.empty(1), 0, 1)], TE,
          r"\(kind, buffer, memory, offset\)", "[5-tuple]"),
        V(lambda env: [("peek", env.buf, torch.empty(1), 0)], RDMAError,
          r"RDMA operation must be 'read' or 'write', not 'peek'", "[('peek', ...)]"),
        V(lambda env: [("read", 5, torch.empty(1), 0)], TE, r"RDMABuffer.*got int",
          "[('read', 5, ...)]"),
        V(lambda env: [("read", env.buf, 5, 0)], RDMAError, r"RDMA needs a torch.Tensor",
          "[('read', buf, 5, 0)]"),
        V(lambda env: [("read", env.buf, torch.empty(1), -1)], RDMAError,
          r"offset must be a non-negative int", "[(..., -1)]"),
        V(lambda env: [("write", env.buf, torch.empty(1), "0")], RDMAError,
          r"offset must be .*got str", "[(..., '0')]"),
        V(lambda env: [("read", env.buf, b"ab", 0)], RDMAError, r"read-only memory",
          "[('read', buf, bytes, 0)]"),
    ])
    add("rdma", "RDMABuffer (dropped)", lambda env, v: v(env.dropped_buffer()), [
        V(lambda b: b.read_into(bytearray(8)).get(timeout=HANG_S), label="read_into"),
        V(lambda b: b.write_from(bytearray(8)).get(timeout=HANG_S), label="write_from"),
        V(lambda b: submit([("read", b, bytearray(8), 0)]).get(timeout=HANG_S), label="submit"),
    ], RDMAError, r"was dropped \(or never registered there\)")
    return tab.cases


# -- helpers of the table ---------------------------------------------------------------------


def _under(mesh: Any, fn: Callable[[], Any]) -> Any:
    with mesh.activate():
        return fn()


def _no_mesh(fn: Callable[[], Any]) -> Any:
    with monarch.no_mesh.activate():
        return fn()


def _once_twice() -> Any:
    port, receiver = Channel.open(once=True)
    try:
        port.send(1)
        receiver.recv().get(timeout=HANG_S)
        return receiver.recv().get(timeout=HANG_S)
    finally:
        receiver.close()


def _wrong_stream(M: TensorMesh) -> Any:
    side = monarch.Stream("bad_side")
    with side.activate():
        x = torch.ones(2)
    return x + 1


def _borrowed(M: TensorMesh, mutable: bool, use: Callable[[Any, Any, Any], Any],
              on_side: bool = False) -> Any:
    """Borrows a fresh tensor onto a side stream, calls use(origin, borrowed,
    borrow) (on the side stream when ``on_side``) and drops the borrow
    whatever happens."""
    origin = torch.ones(3)
    side = monarch.Stream("bad_side")
    result, borrow = side.borrow(origin, mutable=mutable)
    try:
        if on_side:
            with side.activate():
                return use(origin, result, borrow)
        return use(origin, result, borrow)
    finally:
        borrow.drop()


def _dropped(M: TensorMesh) -> Any:
    origin = torch.ones(3)
    side = monarch.Stream("bad_side")
    result, borrow = side.borrow(origin, mutable=False)
    borrow.drop()
    with side.activate():
        return result + 1


def _config_state() -> Tuple[Dict[str, Any], Dict[str, Optional[str]]]:
    env = {s.env: os.environ.get(s.env) for s in mconfig.SETTINGS.values()}
    return mconfig.get_runtime_config(), env


def _restore_config(settings: Dict[str, Any]) -> None:
    if mconfig.get_runtime_config() != settings:
        mconfig.clear_runtime_config()
        mconfig.configure(**settings)


def _configure(kw: Dict[str, Any]) -> Any:
    before = _config_state()
    try:
        return mconfig.configure(**kw)
    finally:
        after = _config_state()
        if after != before:
            _restore_config(before[0])
            raise _StateLeak(f"configure({kw}) changed the settings: {before} -> {after}")


def _configured(kw: Dict[str, Any]) -> Any:
    before = _config_state()
    try:
        with mconfig.configured(**kw):
            return None
    finally:
        after = _config_state()
        if after != before:
            _restore_config(before[0])
            raise _StateLeak(f"configured({kw}) left the settings changed: {after}")


class _StateLeak(Exception):
    """A bad call changed state it should have left alone (always a failure)."""


# ---------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------


class Result(NamedTuple):
    case: Case
    ok: bool
    why: str
    seconds: float
    error: str


def _cleanup_result(env: Optional[Env], value: Any) -> None:
    """A bad call that did not raise may have spawned procs or actors: stop
    them (never the campaign's own meshes, of which it may return a view)."""
    kind = type(value).__name__
    if kind == "ProcMesh":
        if value._parent is not None or (env is not None and any(
                value._root is m._root for m in env.meshes)):
            return
    elif kind == "ActorMesh":
        if value._name in ("targets", "stopped_targets", "badinit"):
            return
    else:
        return
    try:
        value.stop()
    except Exception:
        pass


def judge(case: Case, value: Any, error: Optional[BaseException], seconds: float,
          env: Optional[Env] = None) -> Result:
    if error is None:
        _cleanup_result(env, value)
        return Result(case, False, f"did not raise (returned {_label(value)})", seconds, "")
    try:
        text = str(error)
    except Exception as e:  # noqa: BLE001
        text = f"<str() raised {type(e).__name__}: {e}>"
    shown = f"{type(error).__name__}: {text}"
    if seconds > HANG_S:
        return Result(case, False, f"hung: {seconds:.1f}s > {HANG_S:.0f}s", seconds, shown)
    if isinstance(error, _StateLeak):
        return Result(case, False, f"state leak: {text}", seconds, shown)
    if not isinstance(error, Exception):
        return Result(case, False, f"raised a {type(error).__name__} (not an Exception)",
                      seconds, shown)
    if not isinstance(error, case.expect):
        want = " or ".join(t.__name__ for t in case.expect)
        return Result(case, False, f"raised {type(error).__name__}, expected {want}", seconds,
                      shown)
    if isinstance(error, UNCLEAR_TYPES) and not any(
            issubclass(t, UNCLEAR_TYPES) for t in case.expect):
        return Result(case, False, f"unclear type {type(error).__name__}", seconds, shown)
    if not text.strip() or text.strip() in ("None", "''"):
        return Result(case, False, "empty message", seconds, shown)
    leak = LEAKS.search(text)
    if leak and not (case.match and re.search(case.match, text, re.I | re.S)
                     and leak.group(0) in case.match):
        return Result(case, False, f"unclear message (leaks {leak.group(0)!r})", seconds, shown)
    if case.match and not re.search(case.match, text, re.I | re.S):
        return Result(case, False, f"message does not say /{case.match}/", seconds, shown)
    return Result(case, True, "", seconds, shown)


class Watchdog:
    """Ends the run if one call blocks past HANG_S (a hang), after saying
    which and stopping the meshes' processes."""

    def __init__(self, env_pids: Callable[[], List[int]], report: Callable[[str], None]):
        self._pids = env_pids
        self._report = report
        self._label: Optional[str] = None
        self._since = 0.0
        self._lock = threading.Lock()
        t = threading.Thread(target=self._run, name="bad-calls-watchdog", daemon=True)
        t.start()

    def arm(self, label: str) -> None:
        with self._lock:
            self._label, self._since = label, time.monotonic()

    def disarm(self) -> None:
        with self._lock:
            self._label = None

    def _run(self) -> None:
        while True:
            time.sleep(0.5)
            with self._lock:
                label, since = self._label, self._since
            if label is not None and time.monotonic() - since > HANG_S + 5:
                self._report(f"HANG: {label} blocked for more than {HANG_S:.0f}s; ending the run")
                for pid in self._pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                os._exit(3)


def run_case(env: Env, case: Case, watchdog: Optional[Watchdog] = None) -> Result:
    value: Any = None
    error: Optional[BaseException] = None
    if watchdog is not None:
        watchdog.arm(f"{case.entry} <- {case.label}")
    t0 = time.monotonic()
    try:
        value = case.call(env)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - judged
        error = e
    seconds = time.monotonic() - t0
    if watchdog is not None:
        watchdog.disarm()
    result = judge(case, value, error, seconds, env)
    del value, error
    return result


def descendants(pid: int) -> List[Tuple[int, str]]:
    """Processes below ``pid`` (from /proc), with their command lines."""
    children: Dict[int, List[int]] = collections.defaultdict(list)
    names: Dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            state = stat.rsplit(")", 1)[1].split()[0]
            if state == "Z":
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                names[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):
            continue
        children[ppid].append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append((c, names.get(c, "?")))
            todo.append(c)
    return out


def left_behind(timeout: float = 15.0) -> List[Tuple[int, str]]:
    deadline = time.monotonic() + timeout
    while True:
        procs = descendants(os.getpid())
        if not procs or time.monotonic() > deadline:
            return procs
        time.sleep(0.2)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="print every call")
    ap.add_argument("--only", default="", help="only entries whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the table and exit")
    args = ap.parse_args(argv)
    faulthandler.enable()
    cases = [c for c in build_cases() if args.only in c.entry]
    if args.list:
        for c in cases:
            print(f"{c.category:12} {c.entry:48} {c.label}")
        print(f"{len(cases)} bad calls")
        return 0

    t_start = time.monotonic()
    env = Env()
    print(f"meshes up in {time.monotonic() - t_start:.1f}s; {len(cases)} bad calls", flush=True)
    watchdog = Watchdog(lambda: [p for p, _ in descendants(os.getpid())],
                        lambda s: print(s, file=sys.stderr, flush=True))
    results: List[Result] = []
    broken: List[str] = []
    per_category: Dict[str, List[int]] = collections.OrderedDict()
    last_category = None
    k = 0

    def health(after: str) -> None:
        nonlocal env, k
        k += 1
        watchdog.arm(f"health check after {after}")
        problems = env.check(k)
        watchdog.disarm()
        if problems:
            for p in problems:
                broken.append(f"after {after}: {p}")
                print(f"  BROKEN after {after}: {p}", flush=True)
            env.close()
            env = Env()

    for i, case in enumerate(cases):
        if case.category != last_category:
            if last_category is not None:
                health(f"category {last_category}")
            last_category = case.category
            print(f"[{case.category}]", flush=True)
        if args.verbose:
            print(f"  {case.entry} <- {case.label}", flush=True)
        r = run_case(env, case, watchdog)
        results.append(r)
        counts = per_category.setdefault(case.category, [0, 0])
        counts[0] += 1
        if not r.ok:
            counts[1] += 1
            print(f"  FAIL {case.entry} <- {case.label}: {r.why}\n       {r.error[:300]}",
                  flush=True)
        elif args.verbose:
            print(f"       ok {r.error[:160]}", flush=True)
        if (i + 1) % CHECK_EVERY == 0:
            health(f"{case.entry} <- {case.label}")
    health(f"category {last_category}")

    slowest = max(results, key=lambda r: r.seconds)
    env.close()
    leftovers = left_behind()
    elapsed = time.monotonic() - t_start

    failures = [r for r in results if not r.ok]
    entries = {c.entry for c in cases}
    print()
    print(f"bad calls: {len(results)} against {len(entries)} entry points, "
          f"{len(failures)} failed, in {elapsed:.1f}s "
          f"(slowest {slowest.seconds:.2f}s: {slowest.case.entry} <- {slowest.case.label})")
    print(f"{'category':14} {'calls':>6} {'failed':>6}")
    for cat, (n, bad) in per_category.items():
        print(f"{cat:14} {n:6} {bad:6}")
    kinds = collections.Counter(r.why.split(":")[0].split(" (")[0] for r in failures)
    for why, n in kinds.most_common():
        print(f"  {n:4} {why}")
    print(f"health checks: {k}, broken: {len(broken)}")
    for b in broken:
        print(f"  {b}")
    if leftovers:
        print(f"processes left behind: {len(leftovers)}")
        for pid, cmd in leftovers:
            print(f"  {pid} {cmd}")
    else:
        print("processes left behind: 0")
    if failures:
        print("failures:")
        for r in failures:
            print(f"  [{r.case.category}] {r.case.entry} <- {r.case.label}: {r.why}")
            if r.error:
                print(f"      {r.error[:300]}")
    return 1 if failures or broken or leftovers else 0


if __name__ == "__main__":
    sys.exit(main())
