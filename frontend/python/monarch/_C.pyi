"""monarch._C: the C++ tensor controller (frontend/csrc/_C.cpp; runtime/tensor
Controller.h). Bytes in, bytes out: every argument and event is a serialized
``monarch.plan`` message. Blocking calls release the GIL."""

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

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

class InstructionStream:
    """A session's instructions (frontend/csrc/InstructionStream.h): ops from
    templates, batched to a Controller, a Python ``submit(bytes)`` sink, or
    recorded (``None``) as a TracedProgram."""

    def __init__(self, target: Any, max_batch: int = 256, max_delay_us: int = 500) -> None: ...
    def define_op(self, call_op: bytes,
                  result_types: Sequence[Tuple[int, Sequence[int]]] = ()) -> int: ...
    def location(self, text: str) -> int: ...
    def op(self, template: int, mesh: int, stream: int, location: int,
           inputs: Sequence[int], results: Sequence[int]) -> int: ...
    def raw(self, instruction: bytes,
            types: Sequence[Tuple[int, int, Sequence[int]]] = ()) -> int: ...
    def delete_ref(self, ref: int, mesh: int, stream: int) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def declare(self, program_bytes: bytes) -> None: ...
    def mesh_origin(self, mesh: int, parent: int, kind: str, spec: Any) -> None: ...
    def op_schema(self, name: str, overload: str,
                  arguments: Sequence[Tuple[str, Optional[bytes]]]) -> None: ...
    def traced(self, entry: str = "main") -> bytes: ...
    def begin_body(self, first_local_ref: int) -> None: ...
    def end_body(self, id: int, results: Sequence[int], end_local_ref: int,
                 previous: Optional[bytes] = None, formals: Optional[Sequence[int]] = None
                 ) -> Tuple[List[int], List[Tuple[int, int, int]], List[int], bytes, bool]:
        """(formals, orphans as (ref, mesh, stream), fetches, canonical, defined);
        ``formals`` fixes the recording's formals (a superset of those it uses)."""
    def abort_body(self, end_local_ref: int) -> None: ...
    @property
    def body_depth(self) -> int: ...
    @property
    def body_size(self) -> int: ...
    def call_recording(self, recording: int, actuals: Sequence[int],
                       results: Sequence[int]) -> int: ...
    def loop(self, recording: int, trips: int, lower: int, step: int,
             carried: Sequence[int], captured: Sequence[int],
             induction: Sequence[Tuple[int, int]], results: Sequence[int]) -> int:
        """A Loop instruction (plan.proto) of a defined recording: a traced range."""
    @property
    def issued(self) -> int: ...
    @property
    def recording(self) -> bool: ...

def expand_call(recording: bytes, actuals: Sequence[int], results: Sequence[int],
                next_local: int) -> Tuple[List[bytes], List[int], int]:
    """One call of a plan.Recording as its renamed instructions (the
    simulation's CallRecording): (instruction bytes, locals, next local)."""

class Ref:
    """A ref on the workers (frontend/csrc/Ref.cpp): an owned one is deleted
    there when its last handle goes away (the finalizer queues a DeleteRefs
    into its session's stream)."""

    session: Any
    mesh: Any
    stream: Any
    lending: Any
    id: int
    mesh_id: int
    stream_id: int
    owns: bool

    def __init__(self, session: Any, mesh: Any, stream: Any, owns: bool = True) -> None: ...
    @staticmethod
    def fresh(session: Any, mesh: Any, stream: Any, mesh_id: int, stream_id: int) -> "Ref":
        """A new owned ref whose ids the caller knows; its id is the session's next."""
    def lend(self) -> Any:
        """The ref's Lending (the class set_lending names), made on first use."""

def set_lending(cls: Any) -> None:
    """The class Ref.lend() makes (monarch._src.tensor.core.Lending)."""

#: What cached_dispatch returns when the call is not a hit.
MISS: object

def cached_dispatch(func: Any, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]],
                    mesh: Any) -> Any:
    """A captured op whose signature is cached, issued (frontend/csrc/CachedDispatch.h);
    MISS for anything else, which the Python path (dispatch.dispatch) then handles."""

def capture_dispatch(func: Any, types: Any, args: Tuple[Any, ...] = (),
                     kwargs: Optional[Dict[str, Any]] = None) -> Any:
    """The capture mode's __torch_dispatch__: cached_dispatch on the active mesh,
    else the configured fallback."""

def configure_cached_dispatch(handles: Dict[str, Any]) -> None:
    """The Python state cached_dispatch reads (dispatch.py, once)."""

def signature(args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]]
              ) -> Optional[Tuple[Any, List[Any]]]:
    """(cache key, distributed tensors) of a call, or None when an argument
    cannot be keyed (dispatch.signature)."""
