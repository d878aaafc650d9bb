"""``monarch.range(n)``: a loop whose step number is a tensor on the mesh, and
which a traced program keeps as one loop (docs/python.md "Loops").

``for step in monarch.range(n):`` yields ``step`` as a 0-d int64 tensor on the
active mesh holding the step number, so the body computes with it
(``make_batch(step)``, a learning-rate schedule) without Python numbers that
change every step. Run eagerly it is a plain loop of ``n`` iterations.

Traced (``monarch.trace``), the body runs in Python twice, however large
``n`` is. The first iteration is recorded as a body (``begin_body``) and
called; the second is recorded too and, when the two are the same program
(canonical form, refs renumbered), the rest of the loop is ONE ``loop``
instruction of that recording: the values the first iteration left alive
(what the next one reads, the loss Python still holds) are carried from one
trip to the next, the tensors from before the loop are captured, the step
is the loop's induction tensor. After the loop Python holds what the last
trip made. The trace, the IR (``scf.for``) and the plan keep their size
whatever ``n`` is. A body whose second iteration differs from its first
(state made lazily on the first step, Python numbers that change) runs
unrolled instead, with one warning; Python values (a list of fetched
losses, prints) see the two traced iterations only, as in any trace.
"""

from __future__ import annotations

import builtins
import warnings
from typing import Any, Generator, Iterator, List, NamedTuple, Optional, Tuple

import torch

from ..backend.plan import plan
from . import modes
from .core import Ref, held_refs


class _Body(NamedTuple):
    """One ended iteration body."""

    recording: int  # its recording (the previous one's when it is the same)
    formals: List[int]
    orphans: List[Tuple[int, int, int]]  # formals Python dropped: (ref, mesh, stream)
    canonical: bytes
    defined: bool  # False: the same program as the previous body
    alive: List[Ref]  # the handles of its results


class range:  # noqa: N801 - the builtin's name, as torch and numpy do
    """``monarch.range([start,] stop[, step], mesh=None)``: iterate with the
    step number as a 0-d int64 tensor on ``mesh`` (default: the active
    mesh); a traced program keeps the loop as one loop instruction."""

    def __init__(self, *args: int, mesh: Any = None):
        if not 1 <= len(args) <= 3 or not all(isinstance(a, int) and not isinstance(a, bool)
                                              for a in args):
            raise TypeError("monarch.range([start,] stop[, step]) takes 1 to 3 ints, got "
                            f"{args!r}")
        self._range = builtins.range(*args)
        if self._range.step <= 0:
            raise ValueError("monarch.range: the step must be positive, got "
                             f"{self._range.step}")
        if mesh is not None and not (hasattr(mesh, "_view") and hasattr(mesh, "_session")):
            raise TypeError(f"monarch.range's mesh= takes a ProcMesh (or a view of one), got "
                            f"{type(mesh).__name__}")
        self._mesh = mesh

    def __len__(self) -> int:
        return len(self._range)

    def __repr__(self) -> str:
        r = self._range
        return f"monarch.range({r.start}, {r.stop}, {r.step})"

    def __iter__(self) -> Iterator[Any]:
        mesh = self._mesh if self._mesh is not None else modes.active_mesh()
        if mesh is None:
            raise RuntimeError("monarch.range needs a mesh for its step tensor: call it under "
                               "`with mesh.activate():` or pass mesh=")
        session = mesh._session
        if session.recording is None or session.stream.body_depth > 0:
            # Eager (each step runs as it is issued; compile the body with
            # monarch.compile to send one instruction per step) or inside a
            # body being recorded (an inner loop unrolls into it).
            return (_index(mesh, k) for k in self._range)
        return _traced(session, mesh, self._range)


def _index(mesh: Any, k: int) -> Any:
    with mesh.activate():
        return torch.full((), k, dtype=torch.int64)


def _recorded(session: Any, index: Any,
              previous: Optional[_Body]) -> Generator[Any, None, int]:
    """Yields ``index`` to the loop's body while the stream records it as a
    body; returns the body's first ref. A body that ends the loop (``break``)
    is kept, as one call; one that raises is dropped."""
    stream = session.stream
    first = session._next_ref
    stream.begin_body(first)
    try:
        yield index
    except GeneratorExit:
        _end_and_call(session, first, previous)
        raise
    except BaseException:
        stream.abort_body(session._next_ref)
        raise
    return first


def _traced(session: Any, mesh: Any, steps: builtins.range) -> Iterator[Any]:
    if len(steps) == 0:
        return
    # The first iteration: recorded and called once.
    i0 = _index(mesh, steps[0])
    first = yield from _recorded(session, i0, None)
    one = _end_and_call(session, first, None)
    if len(steps) == 1:
        return
    # The second: recorded, and rolled into a loop when it is the same.
    i1 = _index(mesh, steps[1])
    second = yield from _recorded(session, i1, one)
    two = _end_body(session, second, one)
    why = None if not two.defined else ("its second iteration issues other ops than its "
                                        "first: " + _first_difference(one, two))
    plan = None if why else _match(one, two, i0._ref.id, i1._ref.id)
    if plan is None:
        why = why or ("its second iteration reads a tensor that is neither made by the "
                      "first nor the same in both")
        warnings.warn(
            f"monarch.range: the loop of {len(steps)} steps is unrolled into the trace "
            f"({why}). A loop rolls when every iteration issues the same ops: make state "
            "before the loop, keep numbers that change in tensors (the step tensor)",
            RuntimeWarning, stacklevel=3)
        _call(session, two)
        for k in steps[2:]:
            yield _index(mesh, k)
        return
    if len(steps) > 2:
        _roll(session, one, two, i1, plan, steps)
    else:
        _call(session, two)
    del one, two  # the first iteration's results: read by the loop, then freed


def _first_difference(one: _Body, two: _Body) -> str:
    """Where two recorded iterations part, for the warning: the first
    instruction that differs (refs renumbered alike, ids left out)."""
    a, b = plan.Recording(), plan.Recording()
    a.ParseFromString(one.canonical)
    b.ParseFromString(two.canonical)
    for k, (x, y) in enumerate(zip(a.body, b.body)):
        if x != y:
            first, second = _describe(x), _describe(y)
            if first == second:
                return f"instruction {k} of the body, {first}, has other arguments in the second"
            return (f"instruction {k} of the body is {first} in the first and {second} in "
                    "the second")
    if len(a.body) != len(b.body):
        return f"the first has {len(a.body)} instructions, the second {len(b.body)}"
    return (f"the same {len(a.body)} instructions, but the first leaves {len(a.results)} "
            f"tensors alive ({list(a.results)}, refs in order of appearance) and the second "
            f"{len(b.results)} ({list(b.results)})")


def _describe(inst: Any) -> str:
    kind = inst.WhichOneof("kind")
    what = inst.call_op.name + (f".{inst.call_op.overload}" if inst.call_op.overload else "") \
        if kind == "call_op" else kind
    return f"{what} at {inst.location or 'an unknown location'}"


def _live_locals(session: Any, first: int, end: int) -> List[Ref]:
    """The Ref handles of refs made in [first, end) that Python still holds."""
    return [r for i, r in sorted(held_refs(session).items()) if first <= i < end]


def _end_body(session: Any, first: int, previous: Optional[_Body]) -> _Body:
    """Ends the innermost body as a new recording -- or, the same program as
    ``previous``, as that one; what is left alive of it are its results."""
    end = session._next_ref
    alive = _live_locals(session, first, end)
    rec = session.new_recording()
    try:
        formals, orphans, _fetches, canonical, defined = session.stream.end_body(
            rec, [r.id for r in alive], end, previous.canonical if previous else None)
    except RuntimeError as e:
        raise session.unreachable(e) from None
    if not defined and previous is not None:
        rec = previous.recording
    return _Body(rec, list(formals), list(orphans), canonical, defined, alive)


def _rebind(alive: List[Ref], fresh: List[int]) -> None:
    """Points Python's handles of a body's results at the refs a call (or
    the loop) defines: a traced program's ref ids are unique, the body's
    stay its own."""
    for r, f in zip(alive, fresh):
        r.id = f


def _call(session: Any, body: _Body) -> None:
    """One call of an ended body; its results' handles then name the call's."""
    fresh = [session.new_ref() for _ in body.alive]
    try:
        session.stream.call_recording(body.recording, body.formals, fresh)
    except RuntimeError as e:
        raise session.unreachable(e) from None
    _rebind(body.alive, fresh)
    for ref, mesh_id, stream_id in body.orphans:  # read by the call, dropped by Python
        session.queue_delete(ref, mesh_id, stream_id)


def _end_and_call(session: Any, first: int, previous: Optional[_Body]) -> _Body:
    body = _end_body(session, first, previous)
    _call(session, body)
    return body


class _Plan:
    """How the loop's recording binds the first iteration's body."""

    def __init__(self) -> None:
        self.actuals: List[Tuple[str, Any]] = []  # per formal of the body
        self.captured: List[int] = []


def _match(one: _Body, two: _Body, i0: int, i1: int) -> Optional[_Plan]:
    """Formal by formal: the same ref in both iterations is captured; the
    step tensors are the induction; a ref the first iteration left alive is
    carried. Anything else cannot roll (None)."""
    f1, f2, r1 = one.formals, two.formals, [r.id for r in one.alive]
    if len(f1) != len(f2) or len(one.alive) != len(two.alive):
        return None
    plan = _Plan()
    position = {r: q for q, r in enumerate(r1)}
    for a, b in zip(f1, f2):
        if a == b:
            plan.actuals.append(("captured", a))
            if a not in plan.captured:
                plan.captured.append(a)
        elif a == i0 and b == i1:
            plan.actuals.append(("induction", None))
        elif b in position:
            plan.actuals.append(("carried", position[b]))
        else:
            return None
    return plan


def _roll(session: Any, one: _Body, two: _Body, i1: Any, plan: _Plan,
          steps: builtins.range) -> None:
    """The loop's recording -- one call of the first iteration's, with its
    formals in the loop's order (every carried value, the captured ones, the
    step) -- and the loop of the remaining trips, whose results bind the
    refs the second iteration left alive."""
    stream = session.stream
    carried = [r.id for r in one.alive]
    step_ref = i1._ref.id
    wrapper_first = session._next_ref
    stream.begin_body(wrapper_first)
    actuals = []
    for kind, v in plan.actuals:
        actuals.append(v if kind == "captured" else step_ref if kind == "induction"
                       else carried[v])
    results = [session.new_ref() for _ in carried]
    try:
        stream.call_recording(one.recording, actuals, results)
    except RuntimeError as e:
        stream.abort_body(session._next_ref)
        raise session.unreachable(e) from None
    wrapper = session.new_recording()
    try:
        stream.end_body(wrapper, results, session._next_ref, None,
                        carried + plan.captured + [step_ref])
        fresh = [session.new_ref() for _ in two.alive]
        stream.loop(wrapper, len(steps) - 1, steps[1], steps.step, carried, plan.captured,
                    [(i1._ref.mesh_id, i1._ref.stream_id)], fresh)
    except RuntimeError as e:
        raise session.unreachable(e) from None
    _rebind(two.alive, fresh)
    for ref, mesh_id, stream_id in two.orphans:  # read by the loop, dropped by Python
        session.queue_delete(ref, mesh_id, stream_id)
