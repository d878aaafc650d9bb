"""Reading `monarch-run --trace` files (Chrome trace JSON, written by
tools/monarch-run/RunOutput.cpp) by clock.

Every executed instruction has a host-side span ("cat": "host"): when its
stream thread ran it, which on a CUDA stream is when it launched its kernels.
On CUDA streams it also has a device-time span ("cat": "gpu", args.clock
"gpu", on its own track): when its work ran on the GPU, on the same clock.
Analyses of GPU runs use the device spans; on CPU there are none and the host
spans are the work. Traces written before device spans existed have neither
"cat" nor args.clock: their events are host spans.
"""
from __future__ import annotations

import json
from typing import Dict, Iterable, List, Tuple

HOST = "host"
GPU = "gpu"


def load(path: str) -> List[dict]:
    """The trace's instruction events ("ph": "X"), in file order."""
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def clock(event: dict) -> str:
    return event.get("args", {}).get("clock", HOST)


def of_clock(events: Iterable[dict], which: str) -> List[dict]:
    return [e for e in events if clock(e) == which]


def stream(event: dict) -> int:
    """The plan stream an event ran on (device spans have a tid of their
    own, so that the viewer shows them on a separate track)."""
    args = event.get("args", {})
    return args["stream"] if "stream" in args else event.get("tid", 0)


def preferred(events: List[dict], device: bool = True) -> Tuple[List[dict], str]:
    """The events an analysis should use, and their clock: the device spans
    when asked for and present, else the host spans."""
    if device:
        gpu = of_clock(events, GPU)
        if gpu:
            return gpu, GPU
    return of_clock(events, HOST), HOST


def rank_spans(events: Iterable[dict]) -> Dict[int, Tuple[float, float]]:
    """Per rank (pid): (first start, last end) in the trace's microseconds."""
    spans: Dict[int, Tuple[float, float]] = {}
    for e in events:
        lo, hi = spans.get(e["pid"], (float("inf"), float("-inf")))
        spans[e["pid"]] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))
    return spans
