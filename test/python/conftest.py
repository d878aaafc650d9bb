"""Shared fixtures of the frontend tests.

Every eager test runs on two backends: ``sim`` (the in-process simulation of
the workers, always available) and ``c`` (monarch._C: the C++ controller and
real worker processes), which skips only when ``monarch._C`` is not built.

Tests that build tensors take ``device``: ``$MONARCH_TEST_DEVICE`` ("cpu" by
default; scripts/gpu-check.sh sets "cuda"). "cuda" also runs on a machine
without a GPU: the frontend records the device asked for and the workers
place such tensors on the CPU (one warning each). ``placed_on(device)`` is
where a worker really puts them, which the tests check against the
``source_device`` of their fetches.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.dirname(os.path.dirname(_here))
try:
    import monarch  # noqa: F401
except ImportError:  # running from the source tree without the build
    sys.path.insert(0, os.path.join(_root, "frontend", "python"))
    import monarch  # noqa: F401

from monarch._src.tensor.session import backend_available  # noqa: E402
from monarch._src.tensor.trace_api import find_monarch_opt  # noqa: E402

C_SKIP_REASON = (
    "monarch._C is not built (the C++ controller, target MonarchTensorController, "
    "is missing from this build)"
)


def _test_device() -> str:
    value = os.environ.get("MONARCH_TEST_DEVICE", "cpu") or "cpu"
    if value not in ("cpu", "cuda"):
        raise pytest.UsageError(f"MONARCH_TEST_DEVICE={value!r}: use 'cpu' or 'cuda'")
    return value


@pytest.fixture
def device() -> str:
    """The device tests build their tensors on: $MONARCH_TEST_DEVICE ("cpu"
    or "cuda"), "cuda" also where torch has no GPU (the workers fall back)."""
    return _test_device()


def placed_on(device: str) -> str:
    """The device type a worker really puts tensors asked for on ``device``:
    "cuda" only where this machine has a GPU, else "cpu"."""
    import torch

    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def pytest_report_header(config):
    return f"monarch test device: {_test_device()}"


@pytest.fixture(params=["sim", "c"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "c" and not backend_available("c"):
        pytest.skip(C_SKIP_REASON)
    return request.param


# Worker processes take seconds to start: meshes of the C++ backend are kept
# for the whole test session and shared by tests asking for the same shape
# (as a notebook keeps its mesh). Each test gets its own mesh of a shape.
_pool: dict = {}


def pooled_mesh(backend: str, shape: dict, slot: int = 0, **kw):
    from monarch.actor import this_host

    if backend != "c":
        return None
    key = (tuple(shape.items()), tuple(sorted(kw.items())), slot)
    m = _pool.get(key)
    if m is None or m._session.dead is not None:
        m = this_host().spawn_procs(dict(shape), backend="c", **kw)
        _pool[key] = m
    return m


def pytest_sessionfinish(session, exitstatus):
    for m in _pool.values():
        m.stop()
    _pool.clear()


@pytest.fixture
def spawn(backend: str):
    """spawn(shape, **kw) -> ProcMesh on the test's backend."""
    from monarch.actor import this_host

    meshes = []
    used: dict = {}

    def make(shape, **kw):
        key = (tuple(shape.items()), tuple(sorted(kw.items())))
        slot = used.get(key, 0)
        used[key] = slot + 1
        m = pooled_mesh(backend, shape, slot, **kw)
        if m is None:
            m = this_host().spawn_procs(shape, backend=backend, **kw)
            meshes.append(m)
        return m

    yield make
    for m in meshes:
        m.stop()


@pytest.fixture(autouse=True)
def _programs_pool():
    import programs

    programs.POOL = pooled_mesh
    yield


def require_monarch_opt() -> str:
    opt = find_monarch_opt()
    if opt is None:
        pytest.skip("monarch-opt is not built (the compiler is off in this build)")
    return opt


def run_script(path, timeout: float = 120) -> "subprocess.CompletedProcess[str]":
    """Runs the script at ``path`` as a user runs one (``python path``, from
    its folder), with this interpreter's ``sys.path`` as its PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=os.path.dirname(str(path)))
