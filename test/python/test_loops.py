"""``monarch.range``: the step number as a tensor on the mesh; a traced loop is
one loop instruction, whatever its number of steps (docs/python.md "Loops")."""

from __future__ import annotations

import re
import warnings
from typing import Any, List, Tuple

import pytest
import torch
import torch.nn as nn

import monarch

import programs
from conftest import require_monarch_opt


def looped_ddp(backend: str, device: str = "cpu", steps: int = 5) -> List[Any]:
    """Data-parallel training whose batch and learning rate are functions of
    the step tensor (make_batch(step), an lr schedule); the loss of every
    step and the parameters after the loop are fetched."""
    mesh = programs._spawn(backend, {"dp": 2})
    with mesh.activate():
        r = mesh.rank("dp")
        x0 = (torch.arange(8.0, device=device).reshape(2, 4) + r * 8) / 32
        y = (torch.arange(6.0, device=device).reshape(2, 3) + r * 6) / 24
        model = nn.Linear(4, 3, device=device)
        programs._init_deterministic(model, 0, device)
        params = list(model.parameters())
        for step in monarch.range(steps):
            x = x0 * (1 + step / 10)
            lr = 0.5 / (1 + step)
            loss = ((model(x) - y) ** 2).mean()
            grads = list(monarch.grad_generator(loss, list(reversed(params))))
            for g in grads:
                g.reduce_("dp", "avg")
            with torch.no_grad():
                for p, g in zip(reversed(params), grads):
                    p -= lr * g
        out = [monarch.inspect(p, dp=k) for p in params for k in range(2)]
        out.append(monarch.inspect(loss, dp=0))  # the last step's
    programs._release(mesh)
    return out


def looped_ddp_local(steps: int = 5) -> List[torch.Tensor]:
    X = torch.arange(16.0).reshape(4, 4) / 32
    Y = torch.arange(12.0).reshape(4, 3) / 24
    model = nn.Linear(4, 3)
    programs._init_deterministic(model, 0)
    params = list(model.parameters())
    losses = []
    for k in range(steps):
        x = X * (1 + k / 10)
        lr = 0.5 / (1 + k)
        per_rank = [((model(x[2 * i:2 * i + 2]) - Y[2 * i:2 * i + 2]) ** 2).mean()
                    for i in range(2)]
        grads = torch.autograd.grad(sum(per_rank) / 2, params)
        losses.append(per_rank[0].detach())
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= lr * g
    return [p.detach().clone() for p in params for _ in range(2)] + [losses[-1]]


def _close(got: List[Any], want: List[torch.Tensor]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert torch.allclose(a.cpu().to(torch.float32), b, rtol=1e-5, atol=1e-6), (a, b)


def test_range_yields_the_step_as_a_tensor(backend, device):
    mesh = programs._spawn(backend, {"gpu": 2})
    with mesh.activate():
        seen = [monarch.inspect(s, gpu=1) for s in monarch.range(2, 11, 4)]
    programs._release(mesh)
    assert [int(v) for v in seen] == [2, 6, 10]
    assert all(v.dtype == torch.int64 and v.dim() == 0 for v in seen)


def test_eager_loop_matches_local_torch(backend, device):
    _close(looped_ddp(backend, device, steps=4), looped_ddp_local(4))


@pytest.mark.parametrize("steps", [1, 2, 6])
def test_traced_loop_runs_as_the_eager_one(steps, device):
    require_monarch_opt()
    tr = monarch.trace(looped_ddp, "sim", device, steps)
    text = tr.to_mlir()
    assert text.count("scf.for") == (1 if steps > 2 else 0), text
    _close(tr.run(backend="c"), looped_ddp_local(steps))
    _close(tr.run(backend="sim"), looped_ddp_local(steps))


def test_traced_plan_does_not_grow_with_the_steps(device):
    require_monarch_opt()
    small = monarch.trace(looped_ddp, "sim", device, 10)
    large = monarch.trace(looped_ddp, "sim", device, 10000)
    # The trace, the IR and the plan: the same but for the trip count.
    assert abs(len(small.traced) - len(large.traced)) <= 4
    assert small.to_mlir().count("scf.for") == large.to_mlir().count("scf.for") == 1
    a, b = len(small.to_plan()), len(large.to_plan())
    assert abs(a - b) < 0.01 * min(a, b), (a, b)


def test_a_body_that_changes_is_unrolled_with_one_warning(device):
    require_monarch_opt()

    def growing(backend: str, device: str) -> List[Any]:
        mesh = programs._spawn(backend, {"gpu": 2})
        with mesh.activate():
            acc = torch.zeros(3, device=device)
            extra = []
            for step in monarch.range(4):
                extra.append(torch.ones(3, device=device))  # one more tensor each step
                acc = acc + step * sum(extra)
            out = [monarch.inspect(acc, gpu=0)]
        programs._release(mesh)
        return out

    tr, said = _trace_with_range_warnings(growing, device)
    assert len(said) == 1
    # It names where the two iterations part: the sum over one more tensor.
    assert re.search(r"instruction \d+ of the body, aten::add.Tensor at \S*test_loops\.py:\d+, "
                     r"has other arguments in the second", said[0]), said[0]
    assert "scf.for" not in tr.to_mlir()
    want = torch.zeros(3)
    for k in range(4):
        want = want + k * (k + 1)
    _close(tr.run(backend="c"), [want])
    _close(growing("sim", device), [want])


def test_range_misuse_is_a_clear_error():
    with pytest.raises(RuntimeError, match="needs a mesh"):
        list(monarch.range(3))
    with pytest.raises(TypeError, match="1 to 3 ints"):
        monarch.range(1.5)
    with pytest.raises(ValueError, match="positive"):
        monarch.range(0, 4, -1)


@pytest.mark.parametrize("iterations", [1, 2])
def test_break_ends_a_traced_loop_there(iterations, device):
    """`break` in the first or second (traced) iteration: the trace keeps the
    iterations that ran, as calls, and no loop."""
    require_monarch_opt()

    def prog(backend: str, device: str) -> List[Any]:
        mesh = programs._spawn(backend, {"gpu": 2})
        with mesh.activate():
            acc = torch.zeros(3, device=device)
            ran = 0
            for step in monarch.range(10):
                acc = acc + (step + 1)
                ran += 1
                if ran == iterations:
                    break
            out = [monarch.inspect(acc, gpu=1)]
        programs._release(mesh)
        return out

    tr = monarch.trace(prog, "sim", device)
    assert "scf.for" not in tr.to_mlir()
    want = torch.full((3,), float(sum(range(1, iterations + 1))))
    _close(tr.run(backend="c"), [want])


def _drop_after_next_collection(obj: Any) -> Any:
    """Holds ``obj`` on a thread that lets it go as soon as the next garbage
    collection ends -- as autograd's device thread lets go of a graph's
    tensors after ``backward()`` returned. Returns the join to call."""
    import gc
    import threading

    collected = threading.Event()
    holder = [obj]

    def on_gc(phase: str, info: Any) -> None:
        if phase == "stop":
            collected.set()

    def drop() -> None:
        assert collected.wait(30)
        holder.clear()

    gc.callbacks.append(on_gc)
    thread = threading.Thread(target=drop)
    thread.start()

    def join() -> None:
        thread.join(30)
        gc.callbacks.remove(on_gc)

    return join


def _trace_with_range_warnings(program: Any, device: str) -> Tuple[Any, List[str]]:
    """``monarch.trace`` of ``program``, and what monarch.range warned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tr = monarch.trace(program, "sim", device)
    return tr, [str(w.message) for w in caught if "monarch.range" in str(w.message)]


def test_a_handle_another_thread_drops_late_is_not_a_result(device):
    """A backward through CUDA tensors runs on autograd's device thread, which
    lets go of the graph's tensors only after the caller resumed: the end of
    a body must not count a tensor on its way out as a result. Here the
    second iteration's tensor is held by a thread that drops it right after
    the first collection of the body's end; the loop still rolls."""

    def late_drop(backend: str, device: str) -> List[Any]:
        mesh = programs._spawn(backend, {"gpu": 2})
        with mesh.activate():
            acc = torch.zeros(3, device=device)
            for k, step in enumerate(monarch.range(3)):
                t = torch.ones(3, device=device) * step
                acc = acc + t
                if k == 1:
                    join = _drop_after_next_collection(t)
                t = None
            join()
            out = [monarch.inspect(acc, gpu=0)]
        programs._release(mesh)
        return out

    tr, said = _trace_with_range_warnings(late_drop, device)
    assert not said, said
    assert tr.to_mlir().count("scf.for") == 1
