"""monarch: single-controller distributed PyTorch (Monarch's programming model).

    from monarch.actor import this_host
    import monarch, torch

    mesh = this_host().spawn_procs({"host": 2, "gpu": 2})
    with mesh.activate():
        t = torch.rand(3, 4)
        s = t.reduce("gpu", "sum")
    print(monarch.inspect(s, host=1, gpu=0))

See docs/python.md.
"""

from __future__ import annotations

from ._errors import MonarchUsageError, RemoteException, SupervisionError
from ._proc_mesh import ProcMesh
from ._remote import Remote, remote
from ._session import Future
from ._stream import Borrow, Stream, get_active_stream
from ._tensor import (
    DTensor as Tensor,
    fetch_shard,
    grad_generator,
    inspect,
    reduce,
    reduce_,
    show,
)
from ._trace_api import Compiled, Trace, compile, trace

__all__ = [
    "Borrow",
    "Compiled",
    "Future",
    "MonarchUsageError",
    "ProcMesh",
    "Remote",
    "RemoteException",
    "Stream",
    "SupervisionError",
    "Tensor",
    "Trace",
    "compile",
    "fetch_shard",
    "get_active_stream",
    "grad_generator",
    "inspect",
    "reduce",
    "reduce_",
    "remote",
    "show",
    "trace",
]
