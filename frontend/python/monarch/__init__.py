"""monarch: single-controller distributed PyTorch (Monarch's programming model).

    from monarch.actor import this_host
    import monarch, torch

    mesh = this_host().spawn_procs({"host": 2, "gpu": 2})
    with mesh.activate():
        t = torch.rand(3, 4)
        s = t.reduce("gpu", "sum")
    print(monarch.inspect(s, host=1, gpu=0))

See docs/python.md. This module only re-exports the implementation in
``monarch._src``, lazily (PEP 562): ``import monarch`` costs nothing, and the
tensor frontend (which imports torch) loads at the first name that needs it,
so processes that host only actors never import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, Tuple

# public name -> (module under monarch._src, attribute)
_PUBLIC: Dict[str, Tuple[str, str]] = {
    "Borrow": ("tensor.borrows", "Borrow"),
    "Compiled": ("tensor.compiled", "Compiled"),
    "Extent": ("actor.shape", "Extent"),
    "Future": ("common.future", "Future"),
    "MonarchUsageError": ("common.errors", "MonarchUsageError"),
    "ProcMesh": ("actor.proc_mesh", "ProcMesh"),
    "Remote": ("tensor.remote", "Remote"),
    "RemoteException": ("common.errors", "RemoteException"),
    "Stream": ("tensor.streams", "Stream"),
    "Simulator": ("tensor.simulator", "Simulator"),
    "SupervisionError": ("common.errors", "SupervisionError"),
    "Tensor": ("tensor.api", "DTensor"),
    "Trace": ("tensor.trace_api", "Trace"),
    "clear_runtime_config": ("common.config", "clear_runtime_config"),
    "compile": ("tensor.compiled", "compile"),
    "configure": ("common.config", "configure"),
    "configured": ("common.config", "configured"),
    "fetch_shard": ("tensor.api", "fetch_shard"),
    "get_active_mesh": ("tensor.active", "get_active_mesh"),
    "get_active_stream": ("tensor.streams", "get_active_stream"),
    "get_global_config": ("common.config", "get_global_config"),
    "get_runtime_config": ("common.config", "get_runtime_config"),
    "grad_generator": ("tensor.api", "grad_generator"),
    "inspect": ("tensor.api", "inspect"),
    "no_mesh": ("tensor.active", "no_mesh"),
    "reduce": ("tensor.api", "reduce"),
    "reduce_": ("tensor.api", "reduce_"),
    "range": ("tensor.loops", "range"),
    "remote": ("tensor.remote", "remote"),
    "show": ("tensor.api", "show"),
    "trace": ("tensor.trace_api", "trace"),
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module 'monarch' has no attribute '{name}'")
    module, attr = where
    value = getattr(importlib.import_module(f"monarch._src.{module}"), attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> Any:
    return sorted(set(globals()) | set(_PUBLIC))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ._src.actor.proc_mesh import ProcMesh
    from ._src.actor.shape import Extent
    from ._src.common.config import (clear_runtime_config, configure, configured,
                                     get_global_config, get_runtime_config)
    from ._src.common.errors import MonarchUsageError, RemoteException, SupervisionError
    from ._src.common.future import Future
    from ._src.tensor.active import get_active_mesh, no_mesh
    from ._src.tensor.api import DTensor as Tensor
    from ._src.tensor.api import fetch_shard, grad_generator, inspect, reduce, reduce_, show
    from ._src.tensor.borrows import Borrow
    from ._src.tensor.remote import Remote, remote
    from ._src.tensor.streams import Stream, get_active_stream
    from ._src.tensor.compiled import Compiled, compile
    from ._src.tensor.loops import range
    from ._src.tensor.trace_api import Trace, trace
