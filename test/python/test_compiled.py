"""monarch.compile: a step traced once into a recording the workers keep,
then called with one instruction (docs/python.md "Compiled steps").

Every test compares the compiled step with the same Python run eagerly."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn

import monarch
from monarch._src.tensor import compiled as compiled_mod


def _init(model: nn.Module) -> None:
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1))


def _state_step(spawn, device, compile_it: bool, calls: int = 5):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        w = torch.ones(4, 4, device=device) * (mesh.rank("gpu") + 1)
        x = torch.arange(16.0, device=device).reshape(4, 4) / 16

    def step(x):
        y = x @ w
        w.add_(y.mean() * 0.01)  # state updated in place on the workers
        return y.sum(), monarch.fetch_shard(y.sum(), gpu=1)

    fn = monarch.compile(step) if compile_it else step
    with mesh.activate():
        outs = [fn(x) for _ in range(calls)]
        fetched = [f.get() for _, f in outs]
        returned = [monarch.inspect(s, gpu=0) for s, _ in outs]
        w0 = monarch.inspect(w, gpu=0)
    return fn, mesh, fetched, returned, w0


def test_compiled_step_matches_eager_and_replays_one_instruction(spawn, device):
    fn, mesh, fetched, returned, w0 = _state_step(spawn, device, True)
    _, _, e_fetched, e_returned, e_w0 = _state_step(spawn, device, False)
    for a, b in zip(fetched + returned + [w0], e_fetched + e_returned + [e_w0]):
        assert torch.allclose(a, b), (a, b)
    (sig,) = fn._signatures.values()
    assert sig.stable and sig.traces == 2  # the second trace equals the first
    session = mesh._session
    with mesh.activate():
        x = torch.zeros(4, 4, device=device)
        before = session.issued
        for _ in range(10):
            fn(x)
        assert session.issued - before == 10  # one call_recording per call


def test_returned_tensors_are_new_each_call_without_history(spawn, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        w = torch.ones(3, device=device, requires_grad=True)

    @monarch.compile
    def step(k):
        return (w * k).sum()

    with mesh.activate():
        k = torch.full((3,), 2.0, device=device)
        outs = [step(k) for _ in range(4)]
        assert len({id(o) for o in outs}) == 4
        assert all(o.grad_fn is None and not o.requires_grad for o in outs)
        vals = [monarch.inspect(o) for o in outs]
    assert [v.item() for v in vals] == [6.0] * 4


@pytest.mark.parametrize("comms", [False, True])
def test_ddp_step_with_optimizer_matches_eager(spawn, device, comms):
    mesh = spawn({"host": 2, "gpu": 2})
    dp = mesh.flatten("dp")
    stream = monarch.Stream("comms_compiled") if comms else None

    def run(compile_it: bool):
        with dp.activate():
            r = dp.rank("dp")
            x = (torch.arange(8.0, device=device).reshape(2, 4) + r * 8) / 32
            y = (torch.arange(6.0, device=device).reshape(2, 3) + r * 6) / 24
            model = nn.Linear(4, 3, device=device)
            _init(model)
            opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            borrows = []
            for p in model.parameters():
                if stream is None:
                    p.grad.reduce_("dp", "avg")
                else:
                    g, b = stream.borrow(p.grad, mutable=True)
                    with stream.activate():
                        g.reduce_("dp", "avg")
                    borrows.append(b)
            for b in borrows:
                b.drop()
            opt.step()
            return monarch.fetch_shard(loss, dp=0)

        fn = monarch.compile(step) if compile_it else step
        with dp.activate():
            losses = [fn(x, y) for _ in range(6)]
            losses = [f.get() for f in losses]
            params = [monarch.inspect(p, dp=k) for p in model.parameters() for k in (0, 3)]
            grads = [monarch.inspect(p.grad, dp=1) for p in model.parameters()]
        return fn, losses, params, grads

    fn, losses, params, grads = run(True)
    _, e_losses, e_params, e_grads = run(False)
    for a, b in zip(losses + params + grads, e_losses + e_params + e_grads):
        assert torch.allclose(a, b, atol=1e-6), (a, b)
    (sig,) = fn._signatures.values()
    # Call 1 makes the momentum buffers, call 2 uses them, call 3 agrees.
    assert sig.stable and sig.traces == 3


def test_new_shapes_trace_a_new_signature(spawn, device):
    mesh = spawn({"gpu": 2})

    @monarch.compile
    def double(x):
        return x * 2 + 1

    with mesh.activate():
        small, big = torch.ones(2, device=device), torch.ones(5, device=device)
        outs = [double(small), double(big), double(small), double(big), double(small)]
        vals = [monarch.inspect(o) for o in outs]
    assert [v.shape[0] for v in vals] == [2, 5, 2, 5, 2]
    assert all(torch.equal(v, torch.full_like(v, 3.0)) for v in vals)
    assert len(double._signatures) == 2


def test_get_inside_a_compiled_step_is_an_error(spawn, device):
    mesh = spawn({"gpu": 2})

    @monarch.compile
    def step(x):
        y = x + 1
        if monarch.inspect(y).sum() > 0:  # Python branching on a value
            y = y * 2
        return y

    with mesh.activate():
        x = torch.ones(2, device=device)
        with pytest.raises(monarch.MonarchUsageError, match="GET_IN_COMPILED_STEP"):
            step(x)
        # Nothing of the failed trace ran or stays: the mesh works on.
        z = monarch.inspect(x * 3)
    assert torch.equal(z, torch.full((2,), 3.0))


def test_python_numbers_that_change_run_eagerly_with_one_warning(spawn, device, monkeypatch):
    monkeypatch.setattr(compiled_mod, "RETRACE_LIMIT", 3)
    mesh = spawn({"gpu": 2})
    state = {"lr": 1.0}
    with mesh.activate():
        w = torch.zeros(2, device=device)

    @monarch.compile
    def step():
        w.add_(state["lr"])  # a Python number baked into the ops
        state["lr"] += 1.0

    with mesh.activate():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(6):
                step()
        got = monarch.inspect(w)
    assert torch.equal(got, torch.full((2,), 21.0))  # 1+2+...+6
    msgs = [str(c.message) for c in caught if issubclass(c.category, RuntimeWarning)
            and "monarch.compile" in str(c.message)]
    assert len(msgs) == 1 and "runs eagerly" in msgs[0]


def test_state_replaced_instead_of_updated_runs_eagerly(spawn, device, monkeypatch):
    monkeypatch.setattr(compiled_mod, "RETRACE_LIMIT", 3)
    mesh = spawn({"gpu": 2})
    box = {}
    with mesh.activate():
        box["x"] = torch.zeros(2, device=device)

    @monarch.compile
    def step():
        box["x"] = box["x"] + 1  # a new tensor each call: state threaded by Python

    with mesh.activate():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(5):
                step()
        got = monarch.inspect(box["x"])
    assert torch.equal(got, torch.full((2,), 5.0))
    assert any("in place" in str(c.message) for c in caught)


def test_a_step_that_raises_leaves_nothing_behind(spawn, device):
    mesh = spawn({"gpu": 2})
    calls = {"n": 0}

    @monarch.compile
    def step(x):
        y = x + 1
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("boom")
        return y

    with mesh.activate():
        x = torch.ones(2, device=device)
        with pytest.raises(ValueError, match="boom"):
            step(x)
        vals = [monarch.inspect(step(x)) for _ in range(3)]
    assert all(torch.equal(v, torch.full((2,), 2.0)) for v in vals)
    session = mesh._session
    assert session.stream.body_depth == 0 and session.body is None


def test_compiled_steps_inside_compiled_steps_are_inlined(spawn, device):
    mesh = spawn({"gpu": 2})

    @monarch.compile
    def inner(x):
        return x * 3

    @monarch.compile
    def outer(x):
        return inner(x) + 1

    with mesh.activate():
        x = torch.ones(2, device=device)
        vals = [monarch.inspect(outer(x)) for _ in range(3)]
    assert all(torch.equal(v, torch.full((2,), 4.0)) for v in vals)
    assert inner._signatures == {}  # never compiled on its own


def test_a_step_without_a_mesh_among_several_warns_and_runs(spawn, device):
    a, b = spawn({"gpu": 2}), spawn({"gpu": 2})
    with a.activate():
        w = torch.zeros(2, device=device)

    @monarch.compile
    def step():
        w.add_(1.0)  # a mesh of several, and none active: not compiled

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step()
        step()
    with a.activate():
        got = monarch.inspect(w)
    assert torch.equal(got, torch.full((2,), 2.0))
    msgs = [str(c.message) for c in caught if "monarch.compile" in str(c.message)]
    assert len(msgs) == 1 and "mesh.activate" in msgs[0]
    assert step._signatures == {}
    del b
