"""The trace analyses on synthetic `monarch-run --trace` files.

A CUDA run's trace holds, per instruction, a host-side span (the launch) and a
device-time span (when the GPU ran it, args.clock "gpu"). The readers
(tools/monarch-run/trace_events.py) and the two analyses built on them -- the
DDP step time of bench/passes/ddp_overlap.py and the pipeline step time and
bubble of examples/pipeline/run.py -- must use the device spans where present
and read host-only traces (CPU runs, older traces) as before. The traces
here put different figures on the two clocks, so using the wrong one shows.
"""
from __future__ import annotations

import json
import os
import stat
import sys
import types
from typing import Dict, List

import pytest

_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for sub in (("tools", "monarch-run"), ("examples", "pipeline"), ("bench", "passes")):
    sys.path.insert(0, os.path.join(_root, *sub))

import ddp_overlap  # noqa: E402
import run as pipeline  # noqa: E402
import trace_events  # noqa: E402

DEVICE_TRACK = 1000000  # tools/monarch-run/RunOutput.h, kDeviceTrackBase


def event(name: str, rank: int, ts: float, dur: float, instruction: int,
          clock: str = "host", stream: int = 0, legacy: bool = False) -> dict:
    """One "X" event as monarch-run writes it (legacy: before device spans,
    without "cat" and args.stream/clock)."""
    if legacy:
        return {"name": name, "ph": "X", "pid": rank, "tid": stream, "ts": ts, "dur": dur,
                "args": {"instruction": instruction}}
    tid = stream + (DEVICE_TRACK if clock == "gpu" else 0)
    return {"name": name, "cat": clock, "ph": "X", "pid": rank, "tid": tid, "ts": ts,
            "dur": dur, "args": {"instruction": instruction, "stream": stream, "clock": clock}}


def write(path, events: List[dict]) -> str:
    meta = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "rank 0"}}]
    path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events + meta}))
    return str(path)


# --- trace_events ------------------------------------------------------------

def test_events_split_by_clock_and_legacy_events_are_host(tmp_path):
    events = trace_events.load(write(tmp_path / "t.json", [
        event("aten::mm", 0, 0.0, 5.0, 1),
        event("aten::mm", 0, 3.0, 900.0, 1, clock="gpu"),
        event("aten::add", 1, 1.0, 2.0, 2, stream=2, legacy=True),
    ]))
    assert len(events) == 3  # metadata events are not instructions
    assert [e["args"]["instruction"] for e in trace_events.of_clock(events, "gpu")] == [1]
    assert [e["args"]["instruction"] for e in trace_events.of_clock(events, "host")] == [1, 2]
    # The device track's tid is not the stream; args.stream (or a legacy tid) is.
    assert [trace_events.stream(e) for e in events] == [0, 0, 2]


def test_preferred_takes_device_spans_only_when_present_and_asked(tmp_path):
    both = [event("aten::mm", 0, 0.0, 5.0, 1), event("aten::mm", 0, 3.0, 900.0, 1, clock="gpu")]
    chosen, clock = trace_events.preferred(both)
    assert clock == "gpu" and [e["dur"] for e in chosen] == [900.0]
    chosen, clock = trace_events.preferred(both, device=False)
    assert clock == "host" and [e["dur"] for e in chosen] == [5.0]
    chosen, clock = trace_events.preferred([both[0]])
    assert clock == "host" and chosen == [both[0]]


def test_rank_spans_are_first_start_to_last_end_per_rank():
    spans = trace_events.rank_spans([
        event("a", 0, 10.0, 5.0, 1), event("b", 0, 12.0, 30.0, 2),
        event("c", 1, 0.0, 1.0, 3),
    ])
    assert spans == {0: (10.0, 42.0), 1: (0.0, 1.0)}


# --- ddp_overlap: the step-time span -----------------------------------------

def fake_monarch_run(tmp_path, trace: str) -> str:
    """An executable standing in for monarch-run: writes `trace` where
    --trace says."""
    script = tmp_path / "monarch-run"
    script.write_text(f"""#!{sys.executable}
import shutil, sys
shutil.copy({trace!r}, sys.argv[sys.argv.index("--trace") + 1])
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def ddp_trace(tmp_path, with_device: bool) -> str:
    # Launches are over after 0.2 ms per rank; the GPU work runs 3 ms on rank
    # 0 and 4 ms on rank 1 (the slowest rank sets the span).
    events = [event("aten::mm", 0, 0.0, 100.0, 1), event("reduce", 0, 100.0, 100.0, 2),
              event("aten::mm", 1, 0.0, 100.0, 1), event("reduce", 1, 100.0, 100.0, 2)]
    if with_device:
        events += [event("aten::mm", 0, 50.0, 2000.0, 1, clock="gpu"),
                   event("reduce", 0, 2050.0, 1000.0, 2, clock="gpu"),
                   event("aten::mm", 1, 60.0, 3000.0, 1, clock="gpu"),
                   event("reduce", 1, 3060.0, 1000.0, 2, clock="gpu")]
    return write(tmp_path / "ddp.json", events)


def test_ddp_span_uses_device_time_on_cuda_and_host_time_on_cpu(tmp_path):
    runner = fake_monarch_run(tmp_path, ddp_trace(tmp_path, with_device=True))
    out = str(tmp_path / "out")
    os.makedirs(out)
    span, busy = ddp_overlap.span_ms(runner, "x.plan", True, out, False, device=True)
    assert span == pytest.approx(4.0)
    # per (stream, name), averaged over the 2 ranks, on the same clock
    assert busy == {(0, "aten::mm"): pytest.approx(2.5), (0, "reduce"): pytest.approx(1.0)}
    span, busy = ddp_overlap.span_ms(runner, "x.plan", True, out, False, device=False)
    assert span == pytest.approx(0.2)
    assert busy == {(0, "aten::mm"): pytest.approx(0.1), (0, "reduce"): pytest.approx(0.1)}


def test_ddp_span_on_cuda_refuses_a_trace_without_device_spans(tmp_path):
    runner = fake_monarch_run(tmp_path, ddp_trace(tmp_path, with_device=False))
    out = str(tmp_path / "out")
    os.makedirs(out)
    with pytest.raises(SystemExit, match="no device-time events"):
        ddp_overlap.span_ms(runner, "x.plan", True, out, False, device=True)


# --- the pipeline's step time and bubble --------------------------------------

STEPS, STEP_US = 3, 2000.0


def pipeline_events(clock: str, legacy: bool = False) -> tuple:
    """A 2-stage, 2-microbatch pipeline (one dp rank per stage), 3 steps.

    Each step 2m = 4 transfers per stage. Stage 0 computes 4 x 100 us from
    the step's start, stage 1 4 x 150 us ending 1000 us after it: the window
    is 1000 us, the bubbles 0.6 and 0.4 (mean 0.5). Rank 1 fetches the loss
    at the end of each step, every 2000 us."""
    events: List[dict] = []
    phases: Dict[int, str] = {}
    fetches: List[int] = []
    ids = iter(range(1, 10000))
    for s in range(STEPS):
        base = s * STEP_US
        for rank, start, compute in ((0, 0.0, 100.0), (1, 360.0, 150.0)):
            ts = base + start
            for _ in range(4):
                for name, dur in (("aten::mm", compute), ("send_tensor", 10.0)):
                    i = next(ids)
                    phases[i] = "pipeline"
                    events.append(event(name, rank, ts, dur, i, clock, legacy=legacy))
                    ts += dur
        i = next(ids)
        phases[i] = "other"
        fetches.append(i)
        events.append(event("fetch", 1, base + 1000.0, 10.0, i, clock, legacy=legacy))
    return events, phases, fetches


def launches_of(device_events: List[dict]) -> List[dict]:
    """Host spans of the same instructions as a CUDA run has them: all
    launched within a few microseconds at the start of their step."""
    out = []
    for k, e in enumerate(device_events):
        step = int(e["ts"] // STEP_US)
        out.append(event(e["name"], e["pid"], step * STEP_US + k % 40, 1.0,
                         e["args"]["instruction"]))
    return out


CFG = types.SimpleNamespace(pp=2, dp=1, microbatches=2)


def analyze(tmp_path, monkeypatch, events, phases, fetches) -> dict:
    monkeypatch.setattr(pipeline, "instruction_phases", lambda plan: phases)
    return pipeline.analyze(write(tmp_path / "pipe.json", events), "unused.plan", fetches, CFG)


def test_pipeline_analysis_uses_the_device_spans_of_a_cuda_trace(tmp_path, monkeypatch):
    device, phases, fetches = pipeline_events("gpu")
    st = analyze(tmp_path, monkeypatch, launches_of(device) + device, phases, fetches)
    assert st["clock"] == "gpu"
    assert st["step_ms"] == pytest.approx(STEP_US / 1e3)
    assert st["pipeline_window_ms"] == pytest.approx(1.0)
    assert st["bubble_per_stage"] == pytest.approx([0.6, 0.4])
    assert st["bubble"] == pytest.approx(0.5)
    assert st["bubble_theory"] == pytest.approx(1 / 3)


def test_pipeline_analysis_of_a_host_only_trace_is_unchanged(tmp_path, monkeypatch):
    # The same figures as host spans of an old-format (CPU) trace.
    host, phases, fetches = pipeline_events("host", legacy=True)
    st = analyze(tmp_path, monkeypatch, host, phases, fetches)
    assert st["clock"] == "host"
    assert st["step_ms"] == pytest.approx(STEP_US / 1e3)
    assert st["bubble_per_stage"] == pytest.approx([0.6, 0.4])
    # Launch spans alone give other figures: what a CUDA trace without device
    # spans would measure.
    device, _, _ = pipeline_events("gpu")
    st = analyze(tmp_path, monkeypatch, launches_of(device), phases, fetches)
    assert st["clock"] == "host"
    assert st["bubble"] != pytest.approx(0.5, abs=0.05)


def test_ddp_steady_steps_time_one_run_from_its_step_marks():
    # Rank 0 starts a step every 10 ms, rank 1 every 12 ms (the slower one sets
    # the step); the first step (warm-up) is left out, and so is what falls
    # outside the timed steps (rank 0's mm at 35 ms, after its last mark).
    events = []
    for rank, period in ((0, 10000.0), (1, 12000.0)):
        for k in range(4):
            events.append(event(ddp_overlap.STEP_MARK, rank, k * period, 100.0, 10 + k))
            events.append(event("aten::mm", rank, k * period + 200.0, 1000.0, 20 + k))
    events.append(event("aten::mm", 0, 35000.0, 1000.0, 99))
    step, busy = ddp_overlap.steady_steps(events, skip=1)
    assert step == pytest.approx(12.0)
    # 2 timed steps per rank, each with one 1 ms product and one 0.1 ms mark
    assert busy[(0, "aten::mm")] == pytest.approx(1.0)
    assert busy[(0, ddp_overlap.STEP_MARK)] == pytest.approx(0.1)
    with pytest.raises(SystemExit, match="too few"):
        ddp_overlap.steady_steps(events, skip=3)
