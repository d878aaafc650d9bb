"""Tracing to MLIR: the IR verifies, and the traced program (lowered to a
plan and run by workers) fetches the same values as the eager run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

import monarch
from monarch._src.tensor.tracing import TracedValue

import programs
from conftest import require_monarch_opt

HERE = os.path.dirname(os.path.abspath(__file__))


def _same(a, b):
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert isinstance(a, monarch.RemoteException) and isinstance(b, monarch.RemoteException)
        assert a.rank == b.rank
        assert a.worker_message.splitlines()[0] == b.worker_message.splitlines()[0]
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    assert torch.allclose(a, b, atol=1e-5), (a, b)


@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_trace_verifies(name, device):
    require_monarch_opt()
    tr = monarch.trace(programs.PROGRAMS[name], "sim", device)
    text = tr.to_mlir()
    assert text.startswith("module {") and "monarch.spawn_procs" in text
    # placeholders while tracing
    assert all(isinstance(v, (TracedValue, Exception)) for v in tr.result)
    tr.verify()
    tr.verify("--monarch-verify-borrows")


@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_traced_equals_eager(name, backend, device):
    require_monarch_opt()
    eager = programs.PROGRAMS[name](backend, device)
    tr = monarch.trace(programs.PROGRAMS[name], backend, device)
    if device != "cpu":
        # the IR keeps the device asked for, whatever this machine has
        assert f'#monarch.device<"{device}">' in tr.to_mlir()
    traced = tr.run(backend=backend)
    assert len(traced) == len(eager)
    for a, b in zip(eager, traced):
        _same(a, b)


def test_pipeline_eager_matches_local(backend, device):
    for a, b in zip(programs.pipeline(backend, device), programs.pipeline_local()):
        _same(a, b)


def test_ddp_eager_matches_single_process(backend, device):
    expect = programs.ddp_local()
    for got in (programs.ddp(backend, device), programs.ddp(backend, device, comms=True)):
        for a, b in zip(got, expect):
            _same(a, b)


def test_failure_program_values(backend, device):
    dep, fine = programs.failure(backend, device)
    assert isinstance(dep, monarch.RemoteException) and dep.rank == 1
    assert "programs.py" in dep.location
    assert torch.equal(fine, torch.arange(1.0, 5.0))


def test_compile_decorator(device):
    require_monarch_opt()

    @monarch.compile
    def step(backend, device):
        return programs.matmul(backend, device)

    text = step.to_mlir("sim", device)
    assert "aten::mm" in text
    eager = step("sim", device)
    assert len(eager) == 5 and isinstance(eager[0], torch.Tensor)


def test_trace_syntax_details():
    tr = monarch.trace(programs.rename_split, "sim")
    text = tr.to_mlir()
    assert re.search(r"monarch\.rename %\w+ \(host -> dp, gpu -> tp\)", text), text
    assert re.search(r"monarch\.split %\w+ \(host -> \[dp, pp\], gpu -> \[tp\], pp = 2\)", text), text
    assert "monarch.reduce" in text and "(tp) sum" in text
    tr2 = monarch.trace(programs.ddp, "sim", "cpu", True)
    t2 = tr2.to_mlir()
    assert 'monarch.stream_create : !monarch.stream<"comms">' in t2
    assert "mutable" in t2 and "monarch.borrow_drop" in t2
    assert 'stream = "comms"' in t2


def test_tensor_from_outside_trace_is_an_error():
    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 2}, backend="sim")
    with mesh.activate():
        t = torch.ones(2)

    def fn():
        with mesh.activate():
            return t + 1

    with pytest.raises(RuntimeError, match="outside the traced program"):
        monarch.trace(fn)


SCRIPT = '''
import torch, monarch
from monarch.actor import this_host
mesh = this_host().spawn_procs({"host": 2, "gpu": 2})
with mesh.activate():
    t = torch.rand(3, 4, device="cuda")
    d = t @ t.T
    r = d.reduce("gpu", "sum")
print("one", monarch.fetch_shard(r, host=0, gpu=1).get())
'''


def test_cli_traces_a_script(tmp_path):
    opt = require_monarch_opt()
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    out = tmp_path / "prog.mlir"
    env = dict(os.environ)
    import monarch as m

    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(m.__file__)))
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "monarch.trace", str(script), "-o", str(out), "--verify"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "traced value" in proc.stdout  # get() while tracing
    text = out.read_text()
    assert "aten::rand" in text and '#monarch.device<"cuda">' in text
    assert "monarch.reduce" in text and "monarch.fetch_shard" in text
    check = subprocess.run([opt, str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_trace_is_callable_after_import_of_cli_module():
    import monarch.trace as cli  # noqa: F401 - the module shadows the function

    tr = monarch.trace(programs.matmul, "sim")
    assert "aten::mm" in tr.to_mlir()


def _misuse_programs():
    from monarch.actor import this_host

    def local_tensor():
        mesh = this_host().spawn_procs({"gpu": 2})
        local = torch.ones(3)
        with mesh.activate():
            torch.ones(3) + local

    def wrong_mesh():
        mesh = this_host().spawn_procs({"host": 2, "gpu": 2})
        with mesh.slice(host=0).activate():
            t = torch.ones(2)
        with mesh.slice(host=1).activate():
            t + 1

    def wrong_stream():
        mesh = this_host().spawn_procs({"gpu": 2})
        with mesh.activate():
            t = torch.ones(2)
            with monarch.Stream("comms").activate():
                t * 2

    def borrowed():
        mesh = this_host().spawn_procs({"gpu": 2})
        with mesh.activate():
            t = torch.ones(2)
        monarch.Stream("comms").borrow(t, mutable=True)
        with mesh.activate():
            t + 1

    def dropped():
        mesh = this_host().spawn_procs({"gpu": 2})
        comms = monarch.Stream("comms")
        with mesh.activate():
            t = torch.ones(2)
        t2, b = comms.borrow(t)
        b.drop()
        with comms.activate(), mesh.activate():
            t2 + 1

    def mutating_borrow():
        mesh = this_host().spawn_procs({"gpu": 2})
        with mesh.activate():
            t = torch.ones(2)
        monarch.Stream("comms").borrow(t)
        with mesh.activate():
            t.add_(1)

    def requires_grad():
        mesh = this_host().spawn_procs({"gpu": 2})
        with mesh.activate():
            torch.ones(2, requires_grad=True).reduce("gpu")

    return {
        "LOCAL_TENSOR": local_tensor,
        "WRONG_MESH": wrong_mesh,
        "WRONG_STREAM": wrong_stream,
        "BORROWED": borrowed,
        "DROPPED": dropped,
        "MUTATING_BORROW": mutating_borrow,
        "REQUIRES_GRAD": requires_grad,
    }


@pytest.mark.parametrize("category", sorted(_misuse_programs()))
def test_misuse_raised_while_tracing(category):
    with pytest.raises(monarch.MonarchUsageError, match=f"^{category}: "):
        monarch.trace(_misuse_programs()[category])


def _find_monarch_run():
    opt = require_monarch_opt()
    run = os.path.join(os.path.dirname(opt), "monarch-run")
    if not os.path.exists(run):
        pytest.skip("monarch-run is not built beside monarch-opt")
    return run


def _parse_monarch_run(stdout):
    import ast
    import re

    values = []
    for line in stdout.splitlines():
        m = re.match(r"fetch #(\d+) rank (\d+) \([^)]*\): (.*)$", line)
        if not m:
            continue
        fid, rank, rest = int(m.group(1)), int(m.group(2)), m.group(3)
        if rest.startswith("error:"):
            values.append((fid, rank, rest))
            continue
        tm = re.match(r"tensor<([^>]*)> (.*)$", rest)
        assert tm, line
        values.append((fid, rank, torch.tensor(ast.literal_eval(tm.group(2)), dtype=torch.float64)))
    return [v for v in sorted(values, key=lambda v: v[0])]


@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "no-optimize"])
@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_monarch_run_prints_eager_values(name, optimize, tmp_path, device):
    """A traced program run by monarch-run (with its default optimizing
    pipeline, and without) prints the values of the eager run."""
    run = _find_monarch_run()
    eager = programs.PROGRAMS[name]("sim", device)
    path = tmp_path / f"{name}.mlir"
    path.write_text(monarch.trace(programs.PROGRAMS[name], "sim", device).to_mlir())
    cmd = [run, str(path)] + ([] if optimize else ["--no-optimize"])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    printed = _parse_monarch_run(proc.stdout)
    assert len(printed) == len(eager), proc.stdout + proc.stderr
    for want, (_, rank, got) in zip(eager, printed):
        if isinstance(want, Exception):
            assert isinstance(got, str) and want.worker_message in got
            assert "programs.py" in got  # the Python line that issued the failing op
        else:
            assert not isinstance(got, str), got
            assert torch.allclose(got, want.to(torch.float64).reshape(got.shape), rtol=1e-4,
                                  atol=1e-5), (got, want)


def _grads_program(backend="sim", device="cpu"):
    """autograd through metadata queries (aten::is_same_size) and through
    native_layer_norm_backward's undefined grad_input."""
    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 1}, backend=backend)
    with mesh.activate():
        ln = torch.nn.LayerNorm(4, device=device)
        x = torch.arange(8.0, device=device).reshape(2, 4)
        gw, gb = torch.autograd.grad((ln(x) * x).sum(), [ln.weight, ln.bias])
        w = torch.ones(3, device=device).requires_grad_(True)
        (g2,) = torch.autograd.grad(w * 2, [w], grad_outputs=torch.ones(3, device=device))
    return [monarch.inspect(gw), monarch.inspect(gb), monarch.inspect(g2)]


def _grads_local():
    ln = torch.nn.LayerNorm(4)
    x = torch.arange(8.0).reshape(2, 4)
    gw, gb = torch.autograd.grad((ln(x) * x).sum(), [ln.weight, ln.bias])
    return [gw, gb, torch.full((3,), 2.0)]


def test_undefined_results_and_metadata_queries_traced(backend, device):
    require_monarch_opt()
    want = _grads_local()
    for a, b in zip(_grads_program(backend, device), want):
        _same(a, b)
    tr = monarch.trace(_grads_program, "sim", device)
    assert "aten::native_layer_norm_backward" in tr.to_mlir()
    assert "is_same_size" not in tr.to_mlir()
    traced = tr.run(backend=backend)
    assert len(traced) == len(want)
    for a, b in zip(traced, want):
        _same(a, b)


@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "no-optimize"])
def test_monarch_run_binds_undefined_results_in_place(optimize, tmp_path, device):
    run = _find_monarch_run()
    path = tmp_path / "grads.mlir"
    path.write_text(monarch.trace(_grads_program, "sim", device).to_mlir())
    cmd = [run, str(path)] + ([] if optimize else ["--no-optimize"])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    printed = _parse_monarch_run(proc.stdout)
    want = _grads_local()
    assert len(printed) == len(want), proc.stdout + proc.stderr
    for w, (_, _, got) in zip(want, printed):
        assert not isinstance(got, str), got
        assert torch.allclose(got, w.to(torch.float64).reshape(got.shape), atol=1e-5), (got, w)


def test_a_compiler_run_past_compile_timeout_is_killed_with_a_clear_error(tmp_path, monkeypatch):
    """monarch-opt is bounded (config compile_timeout_ms): a run past it is
    killed and raises TimeoutError naming the setting, instead of hanging
    the program (the Simulator's display() once waited without a bound)."""
    import time

    import monarch.config
    pid_file = tmp_path / "pid"
    stuck = tmp_path / "monarch-opt"
    stuck.write_text(f"#!/bin/sh\necho $$ > {pid_file}\necho 'stuck in a pass' >&2\nexec sleep 60\n")
    stuck.chmod(0o755)
    monkeypatch.setenv("MONARCH_OPT", str(stuck))

    def program():
        mesh = monarch.actor.this_host().spawn_procs({"gpu": 1})
        with mesh.activate():
            torch.ones(2) + 1

    import monarch.actor
    tr = monarch.trace(program)
    start = time.monotonic()
    with monarch.config.configured(compile_timeout_ms=500):
        with pytest.raises(TimeoutError, match=r"no result within 500 ms .*compile_timeout_ms.*"
                                               r"stuck in a pass"):
            tr.to_mlir()
    assert time.monotonic() - start < 30
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed, not left running
        os.kill(pid, 0)
    with pytest.raises(ValueError, match="at least 1"):
        monarch.config.configure(compile_timeout_ms=0)
