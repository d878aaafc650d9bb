"""Every misuse category is raised at the call site, before anything is sent.

The distributed tensors are made on the test device (``device``); the local
tensors of LOCAL_TENSOR stay the controller's CPU tensors they are."""

from __future__ import annotations

import contextlib

import pytest
import torch

import monarch
from conftest import placed_on


@contextlib.contextmanager
def nothing_sent(mesh):
    before = mesh._session.issued
    yield
    assert mesh._session.issued == before, "an instruction was sent"


def raises(category):
    return pytest.raises(monarch.MonarchUsageError, match=f"^{category}: ")


def test_local_tensor(spawn, device):
    mesh = spawn({"gpu": 2})
    local = torch.ones(3)
    with mesh.activate():
        t = torch.ones(3, device=device)
        with nothing_sent(mesh), raises("LOCAL_TENSOR"):
            t + local
        with nothing_sent(mesh), raises("LOCAL_TENSOR"):
            local * 2  # any torch call inside activate runs on the mesh
    with raises("LOCAL_TENSOR"):
        monarch.fetch_shard(local)
    with raises("LOCAL_TENSOR"):
        monarch.reduce(local, "gpu")
    # 0-d local tensors and Python numbers are constants (also to a CUDA tensor)
    with mesh.activate():
        u = t * torch.tensor(2.0) + 1
    assert torch.equal(monarch.inspect(u), torch.full((3,), 3.0))
    fut = monarch.fetch_shard(u, gpu=1)
    fut.get()
    assert fut.source_device.startswith(placed_on(device)), fut.source_device


def test_wrong_mesh(spawn, device):
    mesh = spawn({"host": 2, "gpu": 2})
    a, b = mesh.slice(host=0), mesh.slice(host=1)
    with a.activate():
        t = torch.ones(2, device=device)
    with b.activate():
        with nothing_sent(mesh), raises("WRONG_MESH"):
            t + 1
    other = spawn({"host": 2, "gpu": 2})
    with mesh.activate():
        x = torch.ones(2, device=device)
    with other.activate():
        y = torch.ones(2, device=device)
    with nothing_sent(mesh), raises("WRONG_MESH"):
        x + y
    with raises("WRONG_MESH"):
        x.to_mesh(other)


def test_wrong_stream(spawn, device):
    mesh = spawn({"gpu": 2})
    comms = monarch.Stream("comms")
    with mesh.activate():
        t = torch.ones(2, device=device)
        with comms.activate():
            with nothing_sent(mesh), raises("WRONG_STREAM"):
                t * 2
            with raises("WRONG_STREAM"):
                t.reduce("gpu")
    with raises("WRONG_STREAM"):
        monarch.get_active_stream().borrow(t)


def test_borrowed(spawn, device):
    mesh = spawn({"gpu": 2})
    comms = monarch.Stream("comms")
    with mesh.activate():
        t = torch.ones(2, device=device)
    t2, borrow = comms.borrow(t, mutable=True)
    with mesh.activate():
        with nothing_sent(mesh), raises("BORROWED"):
            t + 1
    with raises("BORROWED"):
        monarch.inspect(t)
    borrow.drop()
    with mesh.activate():
        t + 1  # the origin has its access back


def test_dropped(spawn, device):
    mesh = spawn({"gpu": 2})
    comms = monarch.Stream("comms")
    with mesh.activate():
        t = torch.ones(2, device=device)
    t2, borrow = comms.borrow(t)
    borrow.drop()
    with comms.activate(), mesh.activate():
        with nothing_sent(mesh), raises("DROPPED") as info:
            t2 + 1
    assert "test_misuse.py" in str(info.value)  # where it was dropped


def test_mutating_borrow(spawn, device):
    mesh = spawn({"gpu": 2})
    comms = monarch.Stream("comms")
    with mesh.activate():
        t = torch.ones(2, device=device)
    t2, borrow = comms.borrow(t, mutable=False)
    with mesh.activate():
        with nothing_sent(mesh), raises("MUTATING_BORROW"):
            t.add_(1)
        t + 1  # reading is fine
    with comms.activate(), mesh.activate():
        with raises("MUTATING_BORROW"):
            t2.mul_(2)
        with raises("MUTATING_BORROW"):
            t2.reduce_("gpu")
    with raises("MUTATING_BORROW"):
        comms.borrow(t, mutable=True)
    borrow.drop()


def test_requires_grad(spawn, device):
    mesh = spawn({"gpu": 2})
    comms = monarch.Stream("comms")
    with mesh.activate():
        w = torch.ones(2, requires_grad=True, device=device)
        with nothing_sent(mesh), raises("REQUIRES_GRAD"):
            comms.borrow(w)
        with raises("REQUIRES_GRAD"):
            w.reduce("gpu")
        with torch.no_grad():
            w.reduce("gpu")  # fine without grad
    with raises("REQUIRES_GRAD"):
        w.to_mesh(mesh)


def test_value_on_controller(spawn, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        t = torch.ones(2, device=device)
    with pytest.raises(RuntimeError, match="inspect"):
        bool(t.sum() > 0)
