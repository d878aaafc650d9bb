"""The cached half of capture in C (frontend/csrc/CachedDispatch.h): a call
whose signature was seen takes ``_C.capture_dispatch`` and never reaches
the Python ``dispatch``; what it makes and issues is what the Python path
makes and issues, and every case it does not handle still gets the Python
path's behaviour (errors raised before anything is sent)."""

from __future__ import annotations

import contextlib
import inspect

import pytest
import torch

import monarch
from monarch._src.tensor import dispatch as dispatch_module


@contextlib.contextmanager
def python_dispatches(monkeypatch):
    """Counts the calls that reach the Python path's dispatch()."""
    calls = []
    real = dispatch_module.dispatch

    def counting(func, args, kwargs, mesh):
        calls.append(func)
        return real(func, args, kwargs, mesh)

    monkeypatch.setattr(dispatch_module, "dispatch", counting)
    yield calls


@pytest.mark.parametrize("handler", ["installed", "python"])
def test_a_cached_call_does_not_reach_the_python_path(spawn, device, monkeypatch, handler):
    """Both faces of the capture handler: the one installed here (C on torch
    1.x) and the Python one torch 2.x runs."""
    if handler == "python":
        monkeypatch.setattr(dispatch_module.CaptureMode, "__torch_dispatch__",
                            dispatch_module.python_handler)
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        # shapes no other test uses
        a = torch.full((3, 7 + (handler == "python")), 2.0, device=device)
        b = torch.full((3, 7 + (handler == "python")), 5.0, device=device)
    with python_dispatches(monkeypatch) as calls:
        with mesh.activate():
            first = a * b + a
            firsts = len(calls)
            for _ in range(10):
                again = a * b + a
        assert len(calls) == firsts, [str(f) for f in calls[firsts:]]
    assert firsts <= 2  # mul and add, unless another test cached them
    want = torch.full(a.shape, 12.0)
    assert torch.equal(monarch.inspect(first).cpu(), want)
    assert torch.equal(monarch.inspect(again, gpu=1).cpu(), want)


def _program(x, y):
    """Ops whose results a hit makes in every way the cache knows: new
    tensors, non-contiguous and offset views, tuples (torch.return_types),
    lists, and an in-place op whose result is its input."""
    s = x @ y
    t = s.t()  # strides (1, 3)
    row = s[1]  # storage offset 3
    values, indices = torch.max(s, dim=0)
    parts = torch.split(s, 1, dim=0)
    z = s.clone()
    z.add_(1.0)
    return [s, t, row, values, indices, parts[0], parts[2], z]


def test_hits_make_what_first_calls_make(spawn, device):
    mesh = spawn({"gpu": 2})
    local = _program(torch.arange(12.0).reshape(3, 4), torch.ones(4, 3))
    with mesh.activate():
        x = torch.arange(12.0, device=device).reshape(3, 4)
        y = torch.ones(4, 3, device=device)
        first = _program(x, y)
        hit = _program(x, y)
    for f, h, want in zip(first, hit, local):
        assert (h.shape, h.stride(), h.storage_offset(), h.dtype) == \
            (f.shape, f.stride(), f.storage_offset(), f.dtype)
        assert (h.shape, h.stride(), h.dtype) == (want.shape, want.stride(), want.dtype)
        assert type(h) is type(f) and h._ref.id != f._ref.id
        assert torch.equal(monarch.inspect(h, gpu=1).cpu(), want)
    # The in-place op's result is the tensor it wrote.
    z = hit[-1]
    with mesh.activate():
        w = z.add_(1.0)
    assert w is z
    assert torch.equal(monarch.inspect(z).cpu(), local[-1] + 1)


def test_misuse_of_a_cached_signature_is_raised_before_anything_is_sent(spawn, device):
    mesh = spawn({"gpu": 2})
    comms = monarch.Stream("comms")
    with mesh.activate():
        t = torch.ones(5, 3, device=device)
        t * 2  # cached now
        with comms.activate():
            before = mesh._session.issued
            with pytest.raises(monarch.MonarchUsageError, match="^WRONG_STREAM: "):
                t * 2
            assert mesh._session.issued == before
    t2, borrow = comms.borrow(t, mutable=True)
    with mesh.activate():
        before = mesh._session.issued
        with pytest.raises(monarch.MonarchUsageError, match="^BORROWED: "):
            t * 2
        assert mesh._session.issued == before
    borrow.drop()
    with mesh.activate():
        u = t * 2
    assert torch.equal(monarch.inspect(u).cpu(), torch.full((5, 3), 2.0))


def test_a_hit_is_located_at_the_callers_line(spawn):
    mesh = spawn({"gpu": 2})
    errors = []
    with mesh.activate():
        src = torch.arange(4.0)
        idx = torch.full((1,), 9, dtype=torch.int64)
        for _ in range(2):  # the second call is a hit
            line = inspect.currentframe().f_lineno + 1
            bad = torch.index_select(src, 0, idx)
            errors.append((line, bad))
    for line, bad in errors:
        with pytest.raises(monarch.RemoteException) as e:
            monarch.inspect(bad)
        assert e.value.location.endswith(f"test_cached_dispatch.py:{line}"), e.value.location


def test_dropped_results_are_deleted_on_the_workers(device):
    """A result's Ref (monarch._C.Ref) queues its delete when dropped: the
    simulated workers' table of live refs stays small over a long chain."""
    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 1}, backend="sim")
    try:
        with mesh.activate():
            x = torch.ones(8, device=device)
            for _ in range(500):
                x = x + 1  # each result drops the one before it
        assert torch.equal(monarch.inspect(x).cpu(), torch.full((8,), 501.0))
        live = mesh._session._backend.refs[0]
        assert x._ref.id in live and len(live) < 20, sorted(live)
    finally:
        mesh.stop()
