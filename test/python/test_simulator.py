"""monarch.Simulator: a mesh whose program is recorded and replayed with the
compiler's cost model (docs/python.md "Simulator")."""

import json
import re

import pytest
import torch
import torch.nn as nn

import monarch
from conftest import require_monarch_opt


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(4, 4), nn.ReLU())])

    def forward(self, x, target):
        return nn.functional.cross_entropy(self.layers(x), target)


def _train(model, x, target, comms, drop_late):
    """Monarch's DDP example: each gradient reduced on the comms stream as the
    backward produces it; the borrow dropped before or after asking for the
    next gradient."""
    loss = model(x, target)
    params = list(reversed(list(model.parameters())))
    grads = monarch.grad_generator(loss, params)
    with torch.no_grad():
        it = iter((p, g, *comms.borrow(g, mutable=True)) for p, g in zip(params, grads))
        todo = next(it, None)
        while todo is not None:
            param, grad, comm_grad, borrow = todo
            with comms.activate():
                comm_grad.reduce_("dp", "sum")
            if not drop_late:
                borrow.drop()
            todo = next(it, None)
            if drop_late:
                borrow.drop()
            param += 0.01 * grad


def _simulate(drop_late, tmp_path):
    sim = monarch.Simulator(hosts=1, gpus=4, trace_mode="stream_only",
                            trace_path=str(tmp_path / f"late{drop_late}.json"))
    comms = monarch.Stream("comms")
    with sim.mesh.rename(gpu="dp").activate():
        _train(Net(), torch.rand(3, 4), torch.full((3,), 1, dtype=torch.int64), comms, drop_late)
    lines = sim.display()
    assert len(lines) == 1, lines
    overlap = float(re.search(r"overlap ([0-9.]+)", lines[0]).group(1))
    return overlap, json.loads((tmp_path / f"late{drop_late}.json").read_text()), lines[0]


def test_the_simulation_shows_what_a_later_borrow_drop_overlaps(tmp_path, capsys):
    require_monarch_opt()
    early, _, _ = _simulate(False, tmp_path)
    late, timeline, line = _simulate(True, tmp_path)
    # Dropping the borrow after the next gradient lets the reduce run beside
    # that backward step: more of the communication overlaps compute.
    assert late > early, (early, late)
    assert 'stream "comms": busy' in line and "simulated step" in line
    events = timeline["traceEvents"] if isinstance(timeline, dict) else timeline
    streams = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"stream default", 'stream "comms"'} <= streams
    assert any(e.get("ph") == "X" for e in events)
    out = capsys.readouterr().out
    assert "monarch.Simulator: simulated step" in out and "{host=1, gpu=4}" in out


def test_a_simulated_mesh_starts_no_workers():
    sim = monarch.Simulator(hosts=2, gpus=2)
    assert sim.mesh.sizes == {"host": 2, "gpu": 2}
    assert sim.mesh._tensor_session().has_workers is False


def test_an_idle_mesh_simulates_to_nothing(tmp_path):
    require_monarch_opt()
    lines = monarch.Simulator(gpus=2, trace_path=str(tmp_path / "t.json")).display()
    assert lines == ["simulated step 0.000us; stream default: busy 0.000us; overlap n/a"]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="gpus must be a positive int"):
        monarch.Simulator(gpus=0)
    with pytest.raises(ValueError, match="trace_mode must be one of"):
        monarch.Simulator(trace_mode="all")
    with pytest.raises(NotImplementedError, match="controller's timeline"):
        monarch.Simulator(trace_mode="controller_trace_only")
