"""Monarch's actor API: ``from monarch.actor import Actor, endpoint, this_host``.

The public face of ``monarch._src.actor`` (docs/python.md, "Actors"); it
imports neither torch nor the tensor frontend, so actor worker processes
import it cheaply. Proc meshes start their tensor workers through the tensor
engine when ``spawn_procs`` runs.
"""

from __future__ import annotations

from .._src.actor.actor import Actor, endpoint
from .._src.actor.actor_mesh import ActorMesh, Endpoint, send
from .._src.actor.controllers import get_or_spawn_controller
from .._src.actor.current import (Context, context, current_actor_name, current_rank,
                                  current_size)
from .._src.actor.endpoints import Accumulator, as_endpoint, concurrent_endpoint
from .._src.actor.host_mesh import HostMesh, attach_hosts, slurm_hosts, this_host, this_proc
from .._src.actor.local_hosts import hosts_from_config
from .._src.actor.ports import Channel, Port, PortReceiver, RankedPortReceiver
from .._src.actor.proc_mesh import ProcMesh
from .._src.actor.shape import Extent, Point
from .._src.actor.shutdown import shutdown_context
from .._src.actor.supervision import SupervisionEvent, report_unhandled
from .._src.actor.value_mesh import ValueMesh
from .._src.common.errors import ActorError, SupervisionError
from .._src.common.future import Future

#: Monarch's name for the event ``__supervise__`` receives.
MeshFailure = SupervisionEvent

#: Called (on the supervision thread) with each supervision event that reaches
#: the controller unhandled: a proc of a controller-owned mesh died, an actor
#: stopped after a broadcast raised, or an owning actor did not handle an event
#: of its children. The default writes it to stderr; calls on the failed ranks
#: raise SupervisionError either way. Assign ``lambda event: os._exit(1)`` to
#: make such events end the controller.
unhandled_fault_hook = report_unhandled

__all__ = [
    "Accumulator",
    "Actor",
    "ActorError",
    "ActorMesh",
    "Channel",
    "Context",
    "Endpoint",
    "Extent",
    "Future",
    "HostMesh",
    "MeshFailure",
    "Point",
    "Port",
    "PortReceiver",
    "RankedPortReceiver",
    "ProcMesh",
    "SupervisionError",
    "SupervisionEvent",
    "ValueMesh",
    "as_endpoint",
    "attach_hosts",
    "concurrent_endpoint",
    "context",
    "current_actor_name",
    "current_rank",
    "current_size",
    "endpoint",
    "get_or_spawn_controller",
    "hosts_from_config",
    "send",
    "shutdown_context",
    "slurm_hosts",
    "this_host",
    "this_proc",
    "unhandled_fault_hook",
]
