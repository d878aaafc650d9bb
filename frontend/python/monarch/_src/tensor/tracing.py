"""Tracing: recording a program instead of running it (docs/python.md,
"Tracing to MLIR").

While a :class:`Recording` is current, ``spawn_procs`` starts no workers:
its session's instruction stream (``monarch._C.InstructionStream`` without
a sink) records every instruction the eager path would have sent -- the same
code path, templates included -- with the local types of the values they
define, the derivation of every mesh and the schemas of the ATen ops called.
The result is a ``monarch.plan.TracedProgram`` (runtime/tensor/proto/
trace.proto); monarch-opt imports it into the monarch dialect with the
dialect's own builders (compiler/lib/Import), so there is one printer of the
IR: MLIR's.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional, Tuple

import torch

_current: Optional["Recording"] = None


def current() -> Optional["Recording"]:
    return _current


def check_recorded(session: Any) -> None:
    """While tracing, a tensor or mesh of a session that runs (made before the
    trace) cannot take part: the program would half run."""
    if _current is not None and session.recording is None:
        raise RuntimeError(
            "a tensor or mesh created outside the traced program is used inside it; create "
            "it inside the traced function (or pass what it is made from)")


def sink_for(session: Any) -> Any:
    """Where an operation on ``session``'s meshes goes: its eager sink (a
    recording session's stream records instead of sending)."""
    if _current is not None:
        check_recorded(session)
    return session.eager


class TracedValue:
    """What ``get()`` returns while tracing: the value exists only at run time
    (``instruction`` is the fetch's id in the traced program)."""

    def __init__(self, instruction: int, shape: Tuple[int, ...], dtype: torch.dtype):
        self.instruction = instruction
        self.shape = shape
        self.dtype = dtype

    def __repr__(self) -> str:
        return (f"<traced value of fetch #{self.instruction}: shape={self.shape}, "
                f"dtype={self.dtype}>")


class Recording:
    """The sessions a traced program created (one root mesh: a traced program
    is one plan)."""

    def __init__(self) -> None:
        self.sessions: List[Any] = []

    def add(self, session: Any) -> None:
        if self.sessions:
            raise NotImplementedError(
                "a traced program spawns one root proc mesh (spawn_procs once) and slices or "
                "splits it; it spawned a second one")
        self.sessions.append(session)

    def traced(self, entry: str = "main") -> bytes:
        """The TracedProgram (serialized)."""
        if not self.sessions:
            return b""
        session = self.sessions[0]
        return session.stream.traced(entry)


@contextlib.contextmanager
def tracing(recording: Recording) -> Iterator[Recording]:
    global _current
    prev = _current
    _current = recording
    try:
        yield recording
    finally:
        _current = prev
