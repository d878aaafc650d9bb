"""``monarch.compile(step)``: a step function traced once into a recording
that the workers keep, then called with one instruction per call
(docs/python.md "Compiled steps").

The first call with a given signature (the argument tensors' specs, meshes
and streams, the other arguments' values or identities, grad mode) runs
``step`` with the session's instruction stream recording a *body* instead
of sending (``InstructionStream.begin_body``); its end becomes a
``DefineRecording`` whose formals are the refs from before the step that it
reads or mutates -- the arguments and the tensors it captures (parameters,
optimizer state) -- and one ``CallRecording`` runs it. The second call traces
again and compares the two bodies in canonical form (refs renumbered): a step
whose first call differs -- optimizer state made lazily, gradients that did
not exist yet -- defines its second form, and once two consecutive traces
agree the step is *stable*: later calls run no Python, only
``call_recording(recording, actuals, results)``.

What stays after a call, as eagerly: in-place updates of what the step reads
(parameters, optimizer state) happen on the workers inside the recording;
tensors the step makes and leaves reachable (``p.grad``, new optimizer state)
are results the call binds to the same refs every time; returned tensors are
new each call, without autograd history; fetches inside the step give each
call a future. Python cannot branch on values inside the step (``get()`` is
an error there); Python state that changes the ops every call (a step
counter used as a number) keeps the step from stabilizing: after
``RETRACE_LIMIT`` traces it runs eagerly, with one warning.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..common.future import Future
from . import modes
from .core import Ref, TensorCore, held_refs, make_tensor
from . import core
from .session import live_sessions
from .streams import get_active_stream

#: Traces of one signature before the step is run eagerly instead.
RETRACE_LIMIT = 8
#: Signatures of one compiled step before new ones run eagerly (each keeps a
#: recording on the workers).
SIGNATURE_LIMIT = 64

_VALUE_TYPES = (int, float, bool, str, bytes, type(None), torch.dtype, torch.device)


class BodyTrace:
    """What Python sees while a step is traced (``Session.body``)."""

    __slots__ = ("fetched",)

    def __init__(self) -> None:
        self.fetched: List[Future[Any]] = []  # placeholders of body fetches


class _Signature:
    """One traced form of a step and how to call it."""

    def __init__(self) -> None:
        self.recording = 0
        self.canonical: Optional[bytes] = None
        self.fetch_ids: List[int] = []
        self.fetch_locations: List[str] = []
        self.traces = 0
        self.stable = False
        self.eager = False  # run as plain Python (see Compiled.__call__)
        #: Per formal: (0, leaf index) an argument's current ref, (1, ref) a
        #: captured ref (the same every call).
        self.sources: List[Tuple[int, int]] = []
        #: Per result: a fixed ref (state) or None (a new returned tensor).
        self.result_refs: List[Optional[int]] = []
        #: Per returned tensor result: (spec, mesh, stream, mesh id, stream id).
        self.result_specs: Dict[int, Tuple[Any, Any, Any, int, int]] = {}
        #: The step's output: its tree spec and per leaf ("ret", result
        #: position), ("fetch", k) or ("value", object).
        self.out_spec: Any = None
        self.out_leaves: List[Tuple[str, Any]] = []
        #: What the workers' recording reads or binds, kept alive with it.
        self.keep: List[Any] = []
        #: State refs bound by the previous call (to recognise state a step
        #: replaces instead of updating in place).
        self.state_ids: set = set()
        self.owned: List[Tuple[Any, int, int, int]] = []  # (session, ref, mesh, stream)

    def __del__(self) -> None:
        for session, ref, mesh_id, stream_id in self.owned:
            try:
                session.queue_delete(ref, mesh_id, stream_id)
            except Exception:
                pass


def _leaf_key(x: Any, keep: List[Any]) -> Any:
    if isinstance(x, TensorCore):
        return (x._spec, x._mesh, x._ref.stream, x.requires_grad)
    if type(x) in _VALUE_TYPES:
        return (type(x), x)
    keep.append(x)  # compared by identity: keep it from being reused
    return ("id", id(x))


class Compiled:
    """``monarch.compile(fn)``: call it like ``fn``; see the module docstring.
    ``trace(*args)`` / ``to_mlir(*args)`` capture one call to MLIR."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self._signatures: Dict[Any, _Signature] = {}
        self._warned = False

    # -- calls -------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves: List[Any] = []
        structure = _flatten(args, leaves), _flatten(kwargs, leaves) if kwargs else None
        session = self._session_of(leaves)
        if session is None:
            return self._unplaced(args, kwargs)
        if session.recording is not None or session.body is not None:
            # No workers to keep a recording (monarch.trace), or inside
            # another compiled step: the ops join the enclosing program.
            return self.fn(*args, **kwargs)
        if session.dead is not None:
            raise session.dead
        hold: List[Any] = []
        key = (session, structure, tuple([_leaf_key(x, hold) for x in leaves]),
               torch.is_grad_enabled(), get_active_stream())
        sig = self._signatures.get(key)
        if sig is not None and sig.stable:
            return self._replay(session, sig, leaves)
        if sig is None:
            if len(self._signatures) >= SIGNATURE_LIMIT:
                self._give_up(f"more than {SIGNATURE_LIMIT} argument signatures")
                return self.fn(*args, **kwargs)
            sig = self._signatures[key] = _Signature()
            sig.keep.extend(hold)
        if sig.eager:
            return self.fn(*args, **kwargs)
        return self._trace(session, sig, args, kwargs, leaves)

    def _session_of(self, leaves: List[Any]) -> Any:
        for x in leaves:
            if isinstance(x, TensorCore):
                return x._mesh._session
        mesh = modes.active_mesh()
        if mesh is not None:
            return mesh._session
        live = [s for s in live_sessions if s.stream is not None]
        return live[0] if len(live) == 1 else None

    def _unplaced(self, args: Tuple, kwargs: Dict[str, Any]) -> Any:
        """No tensor argument, no active mesh, not exactly one mesh: plain
        Python -- a function that makes its own meshes needs nothing else;
        one that used an existing mesh is told how to compile it."""
        before = [(s, s.issued) for s in live_sessions if s.stream is not None]
        out = self.fn(*args, **kwargs)
        if any(s.issued != n for s, n in before):
            self._give_up("it has no distributed-tensor argument and was called with no mesh "
                          "active while several meshes exist; pass it a tensor or call it "
                          "under `with mesh.activate():` to compile it")
        return out

    def _give_up(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"monarch.compile: {self.fn.__qualname__} runs eagerly from now on ({why}). "
                "A step compiles when its ops are the same every call: keep numbers that "
                "change (a step counter, a learning rate) in tensors, and update state in "
                "place (x.add_(1), not x = x + 1)", RuntimeWarning, stacklevel=3)

    def _replay(self, session: Any, sig: _Signature, leaves: List[Any]) -> Any:
        actuals = [leaves[v]._ref.id if k == 0 else v for k, v in sig.sources]
        results: List[int] = []
        made: Dict[int, Any] = {}
        cls = core._tensor_class
        for pos, fixed in enumerate(sig.result_refs):
            if fixed is not None:
                results.append(fixed)
            else:
                spec, mesh, stream, mesh_id, stream_id = sig.result_specs[pos]
                ref = Ref.fresh(session, mesh, stream, mesh_id, stream_id)
                made[pos] = make_tensor(cls, spec, mesh, ref)
                results.append(ref.id)
        try:
            session.stream.call_recording(sig.recording, actuals, results)
        except RuntimeError as e:
            raise session.unreachable(e) from None
        return self._output(session, sig, made)

    def _output(self, session: Any, sig: _Signature, made: Dict[int, Any]) -> Any:
        futures = [session.expect_body_fetch(f, loc)
                   for f, loc in zip(sig.fetch_ids, sig.fetch_locations)]
        if futures:
            session.flush()  # someone will wait for them
        out = []
        for kind, v in sig.out_leaves:
            if kind == "ret":
                out.append(made[v])
            elif kind == "fetch":
                out.append(futures[v])
            else:
                out.append(v)
        return tree_unflatten(out, sig.out_spec)

    # -- tracing -----------------------------------------------------------------------
    def _trace(self, session: Any, sig: _Signature, args: Tuple, kwargs: Dict[str, Any],
               leaves: List[Any]) -> Any:
        stream = session.stream
        # The state the last call bound is held by the program only while
        # this trace runs: if the program drops a piece of it (replacing it
        # by a new tensor), its delete is deferred to the body's end and
        # reported as an orphan -- state that replays could not thread.
        sig.keep = [k for k in sig.keep if not (isinstance(k, Ref) and k.id in sig.state_ids)]
        first = session._next_ref
        body = BodyTrace()
        stream.begin_body(first)
        session.body = body
        try:
            out = self.fn(*args, **kwargs)
        except BaseException:
            session.body = None
            stream.abort_body(session._next_ref)
            raise
        session.body = None
        end = session._next_ref
        if stream.body_size == 0:
            # Nothing ran on the mesh (a function that makes its own meshes):
            # nothing to compile; it stays plain Python.
            stream.abort_body(end)
            sig.eager = True
            return out

        # The output: tensors the step made come back as results.
        out_list, out_spec = tree_flatten(out)
        del out
        placeholders = {id(f): k for k, f in enumerate(body.fetched)}
        returned: Dict[int, Tuple[Any, Any]] = {}  # ref -> (weakref, spec info)
        desc: List[Tuple[str, Any]] = []
        for x in out_list:
            if isinstance(x, TensorCore) and first <= x._ref.id < end:
                r = x._ref
                returned[r.id] = (weakref.ref(x), (x._spec, x._mesh, r.stream, r.mesh_id,
                                                   r.stream_id))
                desc.append(("ref", r.id))
                del r
            elif isinstance(x, Future) and id(x) in placeholders:
                desc.append(("fetch", placeholders[id(x)]))
            else:
                desc.append(("value", x))
        del out_list
        x = None
        body.fetched.clear()

        # Which of the step's refs are still reachable (state), and the
        # Python handles of the refs from before it that it may read.
        local: Dict[int, Ref] = {}
        outer: Dict[int, Ref] = {}
        for i, o in held_refs(session).items():  # core.held_refs says how
            if first <= i < end:
                local[i] = o
            elif i < first:
                outer[i] = o
        results = sorted(set(returned) | set(local))
        rec = session.new_recording()
        try:
            formals, orphans, fetch_ids, canonical, defined = stream.end_body(
                rec, results, end, sig.canonical)
        except (RuntimeError, ValueError) as e:
            raise session.unreachable(e) if isinstance(e, RuntimeError) else e from None

        # How this call (and, once stable, every later one) binds the body.
        arg_pos: Dict[int, int] = {}
        for i, x in enumerate(leaves):
            if isinstance(x, TensorCore):
                arg_pos.setdefault(x._ref.id, i)
        replaces_state = any(r in sig.state_ids for r, _, _ in orphans)
        keep: List[Any] = [x for x in sig.keep if not isinstance(x, Ref)]
        sources: List[Tuple[int, int]] = []
        for f in formals:
            if f in arg_pos:
                sources.append((0, arg_pos[f]))
            else:
                sources.append((1, f))
                if f in outer:
                    keep.append(outer[f])
        for r, mesh_id, stream_id in orphans:  # read by the recording, dropped by Python
            sig.owned.append((session, r, mesh_id, stream_id))
        result_refs: List[Optional[int]] = []
        result_specs: Dict[int, Tuple[Any, Any, Any, int, int]] = {}
        position = {r: p for p, r in enumerate(results)}
        made: Dict[int, Any] = {}
        cls = core._tensor_class
        state_objs: Dict[int, Any] = {}
        for p, r in enumerate(results):
            ret = returned.get(r)
            alive = ret[0]() if ret is not None else None
            if r in local or alive is not None:
                result_refs.append(r)  # state: bound to the same ref each call
                keep.append(local[r] if r in local else alive._ref)
                if alive is not None:
                    state_objs[r] = alive
                elif ret is not None:  # returned, its handle gone, its ref kept
                    spec, mesh, _, _, _ = ret[1]
                    state_objs[r] = make_tensor(cls, spec, mesh, local[r])
            else:
                result_refs.append(None)
                result_specs[p] = ret[1]
                spec, mesh, st, mesh_id, stream_id = ret[1]
                made[p] = make_tensor(cls, spec, mesh, Ref.fresh(session, mesh, st, mesh_id,
                                                                 stream_id))
        out_leaves: List[Tuple[str, Any]] = []
        for kind, v in desc:
            if kind == "ref":
                if v in state_objs:
                    out_leaves.append(("value", state_objs[v]))
                else:
                    out_leaves.append(("ret", position[v]))
            else:
                out_leaves.append((kind, v))

        if defined:
            sig.recording = rec
            sig.canonical = canonical
            sig.fetch_ids = list(fetch_ids)
            sig.fetch_locations = [f"{self.fn.__qualname__} (compiled step)"] * len(fetch_ids)
        sig.stable = not defined and not replaces_state
        sig.traces += 1
        sig.sources = sources
        sig.result_refs = result_refs
        sig.result_specs = result_specs
        sig.out_spec = out_spec
        sig.out_leaves = out_leaves
        sig.keep = keep
        sig.state_ids = {r for r in result_refs if r is not None}

        actuals = list(formals)
        call_results = [r if r is not None else made[p]._ref.id
                        for p, r in enumerate(result_refs)]
        try:
            stream.call_recording(sig.recording, actuals, call_results)
        except RuntimeError as e:
            raise session.unreachable(e) from None
        if not sig.stable and sig.traces >= RETRACE_LIMIT:
            sig.eager = True
            self._give_up(f"its ops changed on each of {sig.traces} calls"
                          if not replaces_state else
                          "it replaces a tensor it keeps across calls instead of updating "
                          "it in place")
        return self._output(session, sig, made)

    # -- capture to MLIR ---------------------------------------------------------------
    def trace(self, *args: Any, **kwargs: Any) -> Any:
        from .trace_api import trace
        return trace(self.fn, *args, **kwargs)

    def to_mlir(self, *args: Any, **kwargs: Any) -> str:
        return self.trace(*args, **kwargs).to_mlir()


def _flatten(x: Any, leaves: List[Any]) -> Any:
    """Appends the leaves of tuples, lists and dicts in ``x`` to ``leaves``;
    returns the hashable shape of the containers (pytree's TreeSpec is not
    hashable in every torch)."""
    t = type(x)
    if t is tuple or t is list:
        return (t, tuple([_flatten(e, leaves) for e in x]))
    if t is dict:
        return (dict, tuple([(k, _flatten(v, leaves)) for k, v in x.items()]))
    leaves.append(x)
    return None


def compile(fn: Callable[..., Any]) -> Compiled:
    """Compile a step function: see :class:`Compiled`."""
    if not callable(fn):
        raise TypeError(f"monarch.compile takes a function, got {fn!r}")
    return Compiled(fn)
