"""The ``c`` backend: ``monarch._C.Controller``, the C++ controller that
spawns one tensor worker process per rank (``monarch-tensor-worker``, or a
Python tensor worker) and speaks the protocol of ``protocol.py``."""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Dict, Optional, Sequence, Tuple

from ..common import python_workers
from ..common.binaries import build_binary

TENSOR_WORKER_KINDS = ("native", "python")


def c_module() -> Any:
    try:
        from monarch import _C  # type: ignore[attr-defined]

        return _C
    except ImportError:
        return None


def available() -> bool:
    return c_module() is not None


def missing_message() -> str:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return (
        f"monarch._C (the C++ controller that starts the worker processes) is not built in "
        f"the monarch package at {here}. Build it with `cmake -S . -B build -G Ninja && "
        f"cmake --build build` (docs/building.md; pybind11 and the development headers of the "
        f"Python that imports your torch are needed) and run with PYTHONPATH=build/python."
    )


def native_worker_path() -> str:
    """$MONARCH_TENSOR_WORKER, else the build tree's monarch-tensor-worker
    (build_binary); "" lets the controller look for itself."""
    return os.environ.get("MONARCH_TENSOR_WORKER") or build_binary("monarch-tensor-worker")


def start(shape: Sequence[Tuple[str, int]], *, memory_cap: int, timeout_ms: int,
          tensor_worker: str, hosts: Optional[Dict[str, Any]]) -> Any:
    """A running ``monarch._C.Controller`` (the workers serve when it returns)."""
    if os.environ.get("MONARCH_WORKER_KIND") == "tensor":
        raise RuntimeError(
            "an actor on a Python tensor worker cannot start backend 'c' meshes (this "
            "process holds the worker's copy of the plan schema); use backend='sim'")
    _C = c_module()
    if _C is None:
        raise ImportError(missing_message())
    if tensor_worker == "python":
        # Only workers import it: it carries its own copy of the plan
        # schema, which must not meet _C's in one process.
        if importlib.util.find_spec("monarch._tensor_worker") is None:
            raise ImportError("monarch._tensor_worker is not built (Python tensor "
                              "workers need libtorch_python)")
        worker = python_workers.launcher_path("tensor")
    else:
        worker = native_worker_path()
    try:
        return _C.Controller([(n, s) for n, s in shape], memory_cap=memory_cap,
                             timeout_ms=timeout_ms, worker_path=worker, **(hosts or {}))
    except RuntimeError as e:
        if hosts and "which other hosts cannot reach" in str(e):
            # The runtime listens on one address, chosen at its first use.
            raise RuntimeError(
                "spawn_procs on hosts: this process already made a local mesh, so its runtime "
                "listens on a local socket that other hosts cannot reach; attach the hosts "
                "(attach_hosts, slurm_hosts, hosts_from_config) and spawn on them before any "
                "this_host()/this_proc() mesh") from e
        raise
