"""The protocol between the tensor frontend and what runs its instructions.

Everything crosses as bytes of serialized ``monarch.plan`` messages (the
shape of ``monarch._C.Controller``, docs/python.md "Backends"):

- ``declare(program)``: a ``plan.Program`` holding the root mesh, meshes and
  streams (no instructions) -- once, before anything is submitted;
- ``submit(batch)``: a ``plan.InstructionBatch``, run by every worker in order;
- ``next_event(timeout_ms)``: ``None`` (nothing within the timeout),
  ``("worker", WorkerEvent bytes)`` or ``("proc_failure", rank, message)``;
- ``size()``, ``pids()``, ``stop()``.
"""

from __future__ import annotations

from typing import Any, List, Optional, Protocol, Tuple, Union

Event = Union[Tuple[str, bytes], Tuple[str, int, str]]


class Backend(Protocol):
    def declare(self, program: bytes) -> None: ...

    def submit(self, batch: bytes) -> None: ...

    def next_event(self, timeout_ms: int) -> Optional[Event]: ...

    def size(self) -> int: ...

    def pids(self) -> List[int]: ...

    def stop(self) -> None: ...


class CapsuleSource(Protocol):
    """What the actor layer asks of a tensor session whose processes also
    host actors (Python tensor workers) or whose workers run on host agents."""

    def procs_capsule(self) -> Any: ...

    def host_mesh_capsule(self) -> Any: ...
