"""Proc mesh views: rename, split, slice, flatten, sizes, to_table, errors."""

from __future__ import annotations

import pytest

from monarch.actor import this_host


@pytest.fixture
def mesh():
    m = this_host().spawn_procs({"host": 2, "gpu": 4}, backend="sim")
    yield m
    m.stop()


def test_spawn_shape(mesh):
    assert mesh.sizes == {"host": 2, "gpu": 4}
    assert mesh.size() == 8 and len(mesh) == 8
    assert mesh.size("gpu") == 4
    assert mesh.size(("host", "gpu")) == 8
    assert mesh.ranks() == list(range(8))


def test_spawn_procs_kwargs_and_errors():
    m = this_host().spawn_procs(gpus=3, backend="sim")
    assert m.sizes == {"gpus": 3}
    with pytest.raises(ValueError, match="positive size"):
        this_host().spawn_procs({"gpu": 0}, backend="sim")
    with pytest.raises(TypeError, match="'gpu' must have an int size, got str"):
        this_host().spawn_procs({"gpu": "2"}, backend="sim")
    # No per-host shape: one proc per host (Monarch's spawn_procs()).
    assert this_host().spawn_procs({}, backend="sim").sizes == {"hosts": 1}
    with pytest.raises(TypeError):
        this_host().spawn_procs({"gpu": "8"}, backend="sim")


def test_rename(mesh):
    r = mesh.rename(host="dp", gpu="tp")
    assert r.sizes == {"dp": 2, "tp": 4}
    assert r.ranks() == mesh.ranks()
    assert r.to_table() == (
        "dp\\tp  0  1  2  3\n"
        "    0  0  1  2  3\n"
        "    1  4  5  6  7\n"
    )
    with pytest.raises(KeyError, match="no dimension 'nope'"):
        mesh.rename(nope="x")
    with pytest.raises(ValueError, match="duplicate"):
        mesh.rename(host="gpu")


def test_split_worked_example():
    m = this_host().spawn_procs({"host": 60, "gpu": 24}, backend="sim")
    v = m.split(host=("dp", "pp"), gpu=("tp",), pp=4)
    assert v.sizes == {"dp": 15, "pp": 4, "tp": 24}
    assert v._view.strides == [96, 24, 1]
    assert m.split(host=("dp", "pp"), dp=4).sizes == {"dp": 4, "pp": 15, "gpu": 24}
    assert m.split(host=("dp", "pp"), dp=60)._view.strides == [24, 24, 1]
    stage = v.slice(pp=1)
    assert stage._view.offset == 24 and stage.sizes == {"dp": 15, "tp": 24}


def test_split_errors(mesh):
    with pytest.raises(ValueError, match="do not divide"):
        mesh.split(gpu=("a", "b"), a=3)
    with pytest.raises(ValueError, match="cannot infer"):
        mesh.split(gpu=("a", "b"))
    with pytest.raises(ValueError, match="not a dimension created"):
        mesh.split(gpu=("a", "b"), a=2, c=2)
    with pytest.raises(ValueError, match="duplicate"):
        mesh.split(gpu=("a", "a"))
    with pytest.raises(KeyError):
        mesh.split(nope=("a",))
    with pytest.raises(ValueError, match="multiply to"):
        mesh.split(gpu=("a", "b"), a=2, b=3)


def test_split_to_table_3d(mesh):
    v = mesh.split(host=("dp", "pp"), gpu=("tp",), pp=2)
    assert v.sizes == {"dp": 1, "pp": 2, "tp": 4}
    table = v.to_table()
    assert table == (
        "dp=0:\n"
        "pp\\tp  0  1  2  3\n"
        "    0  0  1  2  3\n"
        "    1  4  5  6  7\n"
    )


def test_slice(mesh):
    s = mesh.slice(host=1)
    assert s.sizes == {"gpu": 4} and s.ranks() == [4, 5, 6, 7]
    s2 = mesh.slice(gpu=slice(0, 4, 2))
    assert s2.sizes == {"host": 2, "gpu": 2} and s2.ranks() == [0, 2, 4, 6]
    assert mesh.slice(host=-1, gpu=slice(1, None)).ranks() == [5, 6, 7]
    assert mesh.slice(host=0, gpu=3).sizes == {}
    assert mesh.slice(host=0, gpu=3).to_table() == "rank 3\n"
    with pytest.raises(IndexError, match="out of range"):
        mesh.slice(host=2)
    with pytest.raises(IndexError):
        mesh.slice(gpu=slice(4, 8))
    with pytest.raises(KeyError):
        mesh.slice(nope=0)
    with pytest.raises(TypeError):
        mesh.slice(host="0")


def test_flatten(mesh):
    f = mesh.flatten("ranks")
    assert f.sizes == {"ranks": 8} and f.ranks() == list(range(8))
    assert mesh.slice(host=1).flatten("g").ranks() == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="cannot flatten"):
        mesh.slice(gpu=slice(0, 4, 2)).flatten("x")
    assert f.to_table() == "ranks  0  1  2  3  4  5  6  7\n rank  0  1  2  3  4  5  6  7\n"


def test_size_errors(mesh):
    with pytest.raises(KeyError):
        mesh.size("nope")


def test_seed_rename_split_tables():
    remote_mesh = this_host().spawn_procs({"host": 4, "gpu": 4}, backend="sim")
    mesh_2d = remote_mesh.rename(host="dp", gpu="tp")
    mesh_3d = remote_mesh.split(host=("dp", "pp"), gpu=("tp",), pp=2)
    assert mesh_2d.sizes == {"dp": 4, "tp": 4}
    assert mesh_3d.sizes == {"dp": 2, "pp": 2, "tp": 4}
    t3 = mesh_3d.to_table()
    assert t3.startswith("dp=0:\npp\\tp")
    assert "dp=1:" in t3
    # dp=1, pp=1, tp=3 is rank 15
    assert t3.rstrip().endswith("15")
