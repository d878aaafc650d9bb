"""torchrun-style SPMD programs on an actor mesh (``monarch.spmd``).

``SPMDActor`` gives each actor of a proc mesh the environment torchrun
gives a worker (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
...; docs.pytorch.org "torchrun" environment variables), computed from the
actor's point in its mesh -- the mesh's last dimension is the "node"'s local
one -- and runs a training script there, so an unchanged
``torch.distributed`` script runs one copy per proc.
"""

from __future__ import annotations

import math
import os
import runpy
import socket
import sys
from typing import Any, Dict, List, Optional, Tuple

from .actor import Actor, endpoint
from .current import current_rank, current_size


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


class SPMDActor(Actor):
    """One torchrun worker per actor: ``setup_env`` sets its environment,
    ``main`` also runs a script (``[path, args...]`` or ``["-m", module,
    args...]``) as ``__main__`` in the actor's process."""

    def __init__(self) -> None:
        point = current_rank()
        sizes = current_size()
        labels = list(sizes)
        local_dim = labels[-1] if labels else None
        self.rank = point.rank
        self.world_size = math.prod(sizes.values()) if sizes else 1
        self.local_world_size = sizes[local_dim] if local_dim else 1
        self.local_rank = point[local_dim] if local_dim else 0
        self.group_rank = self.rank // self.local_world_size
        self.group_world_size = -(-self.world_size // self.local_world_size)

    def _environment(self, master_addr: str, master_port: int) -> Dict[str, str]:
        return {
            "MASTER_ADDR": str(master_addr),
            "MASTER_PORT": str(int(master_port)),
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(self.local_rank),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "GROUP_RANK": str(self.group_rank),
            "GROUP_WORLD_SIZE": str(self.group_world_size),
            "ROLE_NAME": "rank",
            "ROLE_RANK": str(self.rank),
            "ROLE_WORLD_SIZE": str(self.world_size),
        }

    @endpoint
    def get_host_port(self, use_ipaddr: Optional[Any] = None) -> Tuple[str, int]:
        """This host's name (or, asked for, its address) and a free port:
        the rendezvous of rank 0."""
        host = socket.gethostname()
        if use_ipaddr is not None:
            host = socket.gethostbyname(host)
        return host, _free_port()

    @endpoint
    def setup_env(self, master_addr: str, master_port: int) -> None:
        os.environ.update(self._environment(master_addr, master_port))

    @endpoint
    def main(self, master_addr: str, master_port: int, script_args: List[str]) -> bool:
        """Sets the environment and runs the script; True when it returned."""
        if not script_args or (script_args[0] == "-m" and len(script_args) < 2):
            raise ValueError("SPMDActor.main needs [script, args...] or ['-m', module, args...]")
        os.environ.update(self._environment(master_addr, master_port))
        saved = sys.argv
        try:
            if script_args[0] == "-m":
                sys.argv = [script_args[1]] + list(script_args[2:])
                runpy.run_module(script_args[1], run_name="__main__", alter_sys=True)
            else:
                sys.argv = list(script_args)
                runpy.run_path(script_args[0], run_name="__main__")
        finally:
            sys.argv = saved
        return True


def setup_torch_elastic_env(proc_mesh: Any, use_ipaddr: Optional[Any] = None) -> Any:
    """Spawns ``SPMDActor`` on ``proc_mesh`` and sets every actor's torchrun
    environment, rank 0's host and a free port of it as the rendezvous;
    returns the actor mesh."""
    actors = proc_mesh.spawn("_SPMDActor", SPMDActor)
    first = actors.slice(**{name: 0 for name in proc_mesh.sizes})
    addr, port = first.get_host_port.call_one(use_ipaddr).get()
    actors.setup_env.call(addr, port).get()
    return actors
