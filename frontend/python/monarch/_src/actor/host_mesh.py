"""Host meshes: the machines procs are spawned on (docs/python.md "Meshes",
docs/multi-host.md). ``this_host()`` is the local machine; ``attach_hosts``
and ``slurm_hosts`` give meshes of host agents."""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, Optional, Sequence

from .proc_mesh import ProcMesh
from .proc_mesh import spawn_procs as _spawn_procs


class HostMesh:
    """The hosts procs are spawned on; ``this_host()`` is the local machine,
    ``attach_hosts`` and ``slurm_hosts`` give meshes of host agents
    (docs/multi-host.md)."""

    def __init__(self, hosts: int = 1, source: Optional[Dict[str, Any]] = None,
                 local_hosts_dim: bool = False):
        self._hosts = hosts
        self._source = source
        #: hosts_from_config's stand-in: local procs with a "hosts" dim.
        self._local_hosts_dim = local_hosts_dim

    @property
    def extent(self) -> Any:
        """As Monarch's ``Extent``: ``{"hosts": N}`` for a mesh of hosts; for
        ``this_host()`` the extent without dimensions (Monarch's local host
        mesh is a single host, not a mesh of one: its proc meshes have only
        the ``per_host`` dims)."""
        from .shape import Extent

        if self._source is None and not self._local_hosts_dim:
            return Extent([], [])
        return Extent(["hosts"], [self._hosts])

    def spawn_procs(
        self,
        per_host: Optional[Dict[str, int]] = None,
        *,
        backend: Optional[str] = None,
        memory_cap: Optional[int] = None,
        timeout_ms: int = 60000,
        tensor_worker: str = "",
        **sizes: int,
    ) -> ProcMesh:
        """Spawns one worker process per coordinate of ``per_host``.

        ``memory_cap`` (bytes, per worker; default ``$MONARCH_WORKER_MEMORY_CAP``
        or none) caps CPU tensor memory so that programs can probe sizes;
        ``backend`` is ``"c"`` (worker processes) or ``"sim"`` (in-process);
        ``tensor_worker`` (backend "c") is ``"native"`` (the C++
        monarch-tensor-worker, default; ``$MONARCH_TENSOR_WORKER_KIND``) or
        ``"python"`` (the same executor in a Python process: needed by
        ``monarch.remote``).
        """
        if memory_cap is None:
            memory_cap = int(os.environ.get("MONARCH_WORKER_MEMORY_CAP", "0") or 0)
        # Agents (a source), hosts_from_config's local stand-in (a "hosts"
        # dim, no source), or this machine alone (neither).
        remote = ((self._hosts, self._source)
                  if self._source is not None or self._local_hosts_dim else None)
        return _spawn_procs(per_host, backend=backend, memory_cap=memory_cap,
                            timeout_ms=timeout_ms, tensor_worker=tensor_worker,
                            hosts=remote, **sizes)

    def __repr__(self) -> str:
        return f"<HostMesh hosts={self._hosts}>"


_this_host = HostMesh()


def attach_hosts(
    hosts: Optional[Sequence[str]] = None,
    *,
    hosts_file: Optional[str] = None,
    secret_file: str,
    python: str = "",
    pythonpath: Sequence[str] = (),
) -> HostMesh:
    """Running ``monarch-host`` agents, ``["node1:29650", ...]`` or a file of
    them (one ``HOST:PORT`` a line), holding the job secret in ``secret_file``
    (mode 0600). ``spawn_procs({"gpu": 2})`` on it gives ``{"hosts": N,
    "gpu": 2}``; the agents are attached when it is called.

    Python actors spawned on such a mesh run in ``python`` on each host
    (default ``$MONARCH_HOST_PYTHON``, else this interpreter's path), with
    ``pythonpath`` before this process's ``sys.path``; the monarch package and
    the program's files must be at the same paths there (docs/multi-host.md)."""
    if (hosts is None) == (hosts_file is None):
        raise ValueError("attach_hosts needs either hosts or hosts_file")
    if hosts is not None:
        if isinstance(hosts, (str, bytes)) or not hasattr(hosts, "__iter__"):
            raise TypeError(f"attach_hosts takes a list of 'HOST:PORT' strings, got "
                            f"{type(hosts).__name__}")
        hosts = list(hosts)
        for h in hosts:
            if not isinstance(h, str):
                raise TypeError(f"attach_hosts takes 'HOST:PORT' strings, got {type(h).__name__}")
        count = len(hosts)
        source: Dict[str, Any] = {"hosts": list(hosts), "secret_file": secret_file}
    else:
        assert hosts_file is not None
        with open(hosts_file) as f:
            count = sum(1 for line in f if line.split("#", 1)[0].strip())
        source = {"hosts_file": hosts_file, "secret_file": secret_file}
    if count == 0:
        raise ValueError("attach_hosts: no hosts given")
    source.update(python=python, pythonpath=list(pythonpath))
    return HostMesh(count, source)


def slurm_hosts(*, agents_per_node: int = 1, controller_host: str = "",
                python: str = "", pythonpath: Sequence[str] = ()) -> HostMesh:
    """Inside a SLURM allocation: ``spawn_procs`` starts one ``monarch-host``
    per node (``agents_per_node`` per node) with ``srun`` and attaches.
    ``python``/``pythonpath``: as for ``attach_hosts``."""
    nodes = os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES")
    if not os.environ.get("SLURM_JOB_ID") or not nodes:
        raise RuntimeError("slurm_hosts: not inside a SLURM allocation ($SLURM_JOB_ID is unset)")
    return HostMesh(int(nodes) * agents_per_node,
                    {"slurm": True, "agents_per_node": agents_per_node,
                     "controller_host": controller_host, "python": python,
                     "pythonpath": list(pythonpath)})


def this_host() -> HostMesh:
    return _this_host


_this_proc: Any = None
_this_proc_lock = threading.Lock()


def this_proc() -> Any:
    """Monarch's handle to "this process" as a proc mesh, for
    ``this_proc().spawn(name, Actor, ...)``. Here it is a mesh of one proc
    started on first use -- a child process of the controller, since the
    controller's own process hosts no actors -- and the same mesh on every
    call until it is stopped (docs/python.md, "Monarch compatibility")."""
    global _this_proc
    with _this_proc_lock:  # one proc, whichever thread asks first
        if _this_proc is None or _this_proc._root.stopped:
            _this_proc = _spawn_procs()
        return _this_proc
