"""Bad calls against the public Python API raise clear errors and leave the
meshes working (bench/reliability/bad_api_calls.py runs every row of the
table; here the first rows of every entry point, on the same live meshes:
a ``c`` mesh with actors and ``sim`` meshes)."""

from __future__ import annotations

import os
import sys
import time
from collections import OrderedDict
from typing import Dict, List

import pytest

from conftest import C_SKIP_REASON
from monarch._src.tensor.session import backend_available

_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_root, "bench", "reliability"))

import bad_api_calls as bac  # noqa: E402

PER_ENTRY = 2  # rows of each entry point: its first and its last

CASES = bac.build_cases()
BY_ENTRY: Dict[str, List[bac.Case]] = OrderedDict()
for _case in CASES:
    BY_ENTRY.setdefault(_case.entry, []).append(_case)
# Rows that failed before their fixes (silently accepted, or a hang), beyond
# the first and last of their entry point. (The campaign's other hang,
# spawn_procs({"gpu": 10**12}, backend="sim"), allocates without bound when
# it regresses, so only the script runs it, under its watchdog.)
REGRESSIONS = {
    ("this_host().spawn_procs(shape)[c]", "{'gpu': 1000000000000}"),
    ("this_host().spawn_procs(**dims)[c]", "({'gpu': 2}, gpu=2)"),
    ("ProcMesh[sim].slice", "gpu=slice(0.5, 1)"),
    ("ActorMesh.slice", "gpu=slice(True, 2)"),
    ("ProcMesh.spawn(name)", "'a[0]'"),
    ("Future.get(timeout)[pending]", "-1"),
    ("ValueMesh.item", "host=0, gpu=1.7"),
    ("Extent / Point", "rank_of([])"),
    ("fetch_shard(t, coords)[c]", "coords=5"),
    ("stopped mesh[c]", "torch.ones under activate"),
    ("monarch.config.configure", "heartbeat_interval_ms=10**30"),
    ("RDMABuffer.write_from(offset=)", "True"),
}
SUBSET = {e: (cs[:PER_ENTRY - 1] + cs[-1:]) if len(cs) >= PER_ENTRY else cs
          for e, cs in BY_ENTRY.items()}
for _entry, _label in sorted(REGRESSIONS):
    _row = [c for c in BY_ENTRY[_entry] if c.label == _label]
    assert len(_row) == 1, (_entry, _label)
    if _row[0] not in SUBSET[_entry]:
        SUBSET[_entry] = SUBSET[_entry] + _row


def test_the_table_is_ten_times_the_audit():
    """>= 700 bad calls (the earlier audit made 70), against >= 35 entry
    points, in every category."""
    assert len(CASES) >= 700
    assert len(BY_ENTRY) >= 35
    categories = {c.category for c in CASES}
    assert {"spawn_procs", "views", "actors", "adverbs", "futures", "tensors", "config",
            "rdma"} <= categories
    # Tensor entry points run on both backends.
    assert any(e.endswith("[c]") for e in BY_ENTRY) and any(e.endswith("[sim]") for e in BY_ENTRY)


@pytest.fixture(scope="module")
def env():
    if not backend_available("c"):
        pytest.skip(C_SKIP_REASON)
    e = bac.Env()
    yield e
    e.close()


@pytest.mark.parametrize("entry", list(SUBSET))
def test_bad_calls_raise_clear_errors(env, entry):
    results = [bac.run_case(env, c) for c in SUBSET[entry]]
    failed = [f"{r.case.label}: {r.why} -- {r.error[:200]}" for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert all(r.seconds < bac.HANG_S for r in results)


def test_meshes_work_after_the_bad_calls(env):
    assert env.check(7) == []


def test_closing_leaves_no_worker_processes(env):
    from monarch._src.actor.actor_mesh import actor_pids

    pids = list(env.c._session.backend.pids()) + list(actor_pids(env.actors).values())
    assert pids and all(os.path.exists(f"/proc/{p}") for p in pids)
    env.close()

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 15
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)]


def _case(expect=(ValueError,), match=r"size") -> bac.Case:
    return bac.Case("test", "entry", "label", lambda env: None, expect, match)


def test_the_judge_fails_what_is_not_a_clear_refusal():
    """The campaign's rules themselves: each of these is a failure."""
    ok = bac.judge(_case(), None, ValueError("mesh dimension 'gpu' must have a positive size"),
                   0.01)
    assert ok.ok, ok.why
    cases = {
        "did not raise": bac.judge(_case(), 42, None, 0.01),
        "hung": bac.judge(_case(), None, ValueError("size"), bac.HANG_S + 1),
        "raised AttributeError": bac.judge(
            _case(), None, AttributeError("'int' object has no attribute 'size'"), 0.01),
        "unclear type": bac.judge(
            _case(expect=(Exception,)), None, AttributeError("size"), 0.01),
        "empty message": bac.judge(_case(match=""), None, ValueError(""), 0.01),
        "unclear message": bac.judge(
            _case(expect=(TypeError,), match=""), None,
            TypeError("'<' not supported between instances of 'str' and 'int'"), 0.01),
        "does not say": bac.judge(_case(), None, ValueError("bad value"), 0.01),
        "not an Exception": bac.judge(_case(), None, SystemExit(1), 0.01),
        "state leak": bac.judge(_case(), None, bac._StateLeak("configure set it"), 0.01),
    }
    for why, r in cases.items():
        assert not r.ok and why in r.why, (why, r.why)
