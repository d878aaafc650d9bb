"""monarch._C: the C++ tensor controller (frontend/csrc/_C.cpp; runtime/tensor
Controller.h). Bytes in, bytes out: every argument and event is a serialized
``monarch.plan`` message. Blocking calls release the GIL."""

from typing import Any, List, Optional, Sequence, Tuple, Union

Event = Union[Tuple[str, bytes], Tuple[str, int, str]]

class Controller:
    def __init__(
        self,
        shape: Sequence[Tuple[str, int]],
        memory_cap: int = 0,
        timeout_ms: int = 60000,
        worker_path: str = "",
        hosts: Sequence[str] = (),
        hosts_file: str = "",
        secret_file: str = "",
        slurm: bool = False,
        controller_host: str = "",
        agents_per_node: int = 1,
    ) -> None: ...
    def declare(self, program_bytes: bytes) -> None: ...
    def submit(self, batch_bytes: bytes) -> None: ...
    def next_event(self, timeout_ms: int = 0) -> Optional[Event]:
        """None, ("worker", WorkerEvent bytes) or ("proc_failure", rank, message)."""
    def size(self) -> int: ...
    def pids(self) -> List[int]: ...
    def procs_capsule(self) -> Any:
        """The workers' ProcMesh as a capsule "monarch.ProcMesh" (monarch._actors)."""
    def host_mesh_capsule(self) -> Optional[Any]:
        """The host mesh as a capsule "monarch.HostMesh", None on one host."""
    def stop(self) -> None: ...
