"""An in-process simulation of the tensor workers (``backend="sim"``,
``MONARCH_BACKEND=sim``; only when asked for).

It executes plan instructions with the semantics of docs/plan.md on one
ref table per rank, synchronously, with real torch in the controller's
process: a reference the C++ workers are compared with in tests. Same interface as
``monarch._C.Controller``: bytes in, ``("worker", WorkerEvent bytes)`` out.
"""

from __future__ import annotations

import collections
import warnings
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

import torch

from ..backend.plan import plan
from ..mesh.view import Dim, MeshView
from . import remote_exec
from .modes import local
from .values import PLAN_TO_DTYPE, from_tensor_data, from_value, tensor_data

_warned_cuda = False


def _device(spec: str) -> torch.device:
    """A device of the plan: ``cuda`` runs on the CPU without a GPU (one warning)."""
    global _warned_cuda
    if spec.startswith("cuda") and not torch.cuda.is_available():
        if not _warned_cuda:
            _warned_cuda = True
            warnings.warn("monarch: no GPU; device 'cuda' runs on the CPU", stacklevel=2)
        spec = "cpu"
    return torch.device(spec)


class _Err:
    def __init__(self, failure: "plan.Failure"):
        self.failure = failure


class _Dependent(Exception):
    def __init__(self, err: _Err):
        self.err = err


def _nbytes(t: Any) -> int:
    if isinstance(t, torch.Tensor):
        return t.numel() * t.element_size()
    return 0


class SimBackend:
    def __init__(self, shape: Sequence[Tuple[str, int]], memory_cap: int = 0):
        self.root = MeshView.root(list(shape))
        self.meshes: Dict[int, MeshView] = {0: self.root}
        self.refs: Dict[int, Dict[int, Any]] = {r: {} for r in range(self.root.size())}
        self.borrows: Dict[Tuple[int, int], int] = {}
        self.events: Deque[Tuple[str, bytes]] = collections.deque()
        self.memory_cap = memory_cap
        self.recordings: Dict[int, bytes] = {}  # DefineRecording id -> Recording bytes
        self._next_local = -1  # refs local to a recording call, as the executor's

    # -- controller interface ------------------------------------------------------
    def size(self) -> int:
        return self.root.size()

    def declare(self, program_bytes: bytes) -> None:
        prog = plan.Program()
        prog.ParseFromString(program_bytes)
        for m in prog.meshes:
            self._add_mesh(m)

    def submit(self, batch_bytes: bytes) -> None:
        batch = plan.InstructionBatch()
        batch.ParseFromString(batch_bytes)
        # The simulated workers run plain torch, also when the program sends
        # from inside mesh.activate().
        with local():
            for inst in batch.instructions:
                self.execute(inst)

    def run_program(self, prog: "plan.Program") -> None:
        for m in prog.meshes:
            self._add_mesh(m)
        for inst in prog.instructions:
            self.execute(inst)

    def next_event(self, timeout_ms: int = 0) -> Optional[Tuple[str, bytes]]:
        if self.events:
            return self.events.popleft()
        return None

    def stop(self) -> None:
        self.refs = {r: {} for r in self.refs}

    # -- helpers ----------------------------------------------------------------------
    def _add_mesh(self, m: "plan.Mesh") -> None:
        self.meshes[m.id] = MeshView(m.offset, [Dim(d.name, d.size, d.stride) for d in m.dims])

    def _event(self, rank: int, **kw: Any) -> None:
        ev = plan.WorkerEvent(rank=rank, **kw)
        self.events.append(("worker", ev.SerializeToString()))

    def _live_bytes(self, rank: int) -> int:
        seen = set()
        total = 0
        for v in self.refs[rank].values():
            if isinstance(v, torch.Tensor):
                key = v.untyped_storage().data_ptr() if hasattr(v, "untyped_storage") else v.storage().data_ptr()
                if key in seen:
                    continue
                seen.add(key)
                total += _nbytes(v)
        return total

    def _get(self, rank: int, ref: int) -> Any:
        v = self.refs[rank].get(ref)
        if v is None:
            raise RuntimeError(f"ref {ref} is not defined on rank {rank}")
        if isinstance(v, _Err):
            raise _Dependent(v)
        return v

    def _fail(self, rank: int, inst: "plan.Instruction", refs: Sequence[int], message: str) -> None:
        f = plan.Failure(instruction=inst.id, rank=rank, message=message, location=inst.location)
        err = _Err(f)
        for r in refs:
            self.refs[rank][r] = err
        self._event(rank, failure=f)

    def _value(self, rank: int, v: "plan.Value") -> Any:
        return from_value(v, lambda r: self._get(rank, r), device=_device)

    def _ranks(self, mesh_id: int) -> List[int]:
        return self.meshes[mesh_id].ranks()

    # -- execution --------------------------------------------------------------------------
    def execute(self, inst: "plan.Instruction") -> None:
        kind = inst.WhichOneof("kind")
        if kind == "create_mesh":
            self._add_mesh(inst.create_mesh.mesh)
            return
        if kind in ("create_stream", "borrow_first_use", "borrow_last_use", "request_status"):
            if kind == "request_status":
                for r in self.refs:
                    self._event(r, status=inst.id)
            return
        if kind == "define_recording":
            rec = inst.define_recording.recording
            self.recordings[rec.id] = rec.SerializeToString()
            return
        if kind == "call_recording":
            self._call_recording(inst)
            return
        if kind == "loop":
            self._loop(inst)
            return
        if kind == "reduce":
            self._reduce(inst)
            return
        if kind == "send_tensor":
            self._send(inst)
            return
        for rank in self._ranks(inst.mesh):
            getattr(self, "_" + kind)(rank, inst)

    def _call_recording(self, inst: "plan.Instruction") -> None:
        """The body renamed (``_C.expand_call``, the executor's renaming),
        run instruction by instruction; its locals freed after."""
        call = inst.call_recording
        rec = self.recordings.get(call.recording)
        ranks = range(self.root.size())
        if rec is None:
            for rank in ranks:
                self._fail(rank, inst, list(call.results),
                           f"unknown recording {call.recording}")
            return
        from ..backend import workers as c_backend
        try:
            body, locals_, self._next_local = c_backend.c_module().expand_call(
                rec, list(call.actuals), list(call.results), self._next_local)
        except ValueError as e:
            for rank in ranks:
                self._fail(rank, inst, list(call.results), str(e))
            return
        where = f" (recording {call.recording}, call {inst.id})"
        for b in body:
            step = plan.Instruction()
            step.ParseFromString(b)
            step.location = step.location + where
            self.execute(step)
        for rank in ranks:
            for r in locals_:
                self.refs[rank].pop(r, None)

    def _loop(self, inst: "plan.Instruction") -> None:
        """``trips`` calls of the recording (plan.proto's Loop): carried
        values threaded through fresh locals, the induction tensor made on
        its mesh's ranks each trip; the results bind the last trip's."""
        loop = inst.loop
        carried = list(loop.carried)
        if loop.trips == 0:
            for rank in self.refs:
                for r, c in zip(loop.results, carried):
                    if c in self.refs[rank]:
                        self.refs[rank][r] = self.refs[rank][c]
            return
        for k in range(loop.trips):
            induction = []
            for ind in loop.induction:
                ref = self._next_local
                self._next_local -= 1
                for rank in self._ranks(ind.mesh):
                    self.refs[rank][ref] = torch.tensor(loop.lower + k * loop.step)
                induction.append(ref)
            last = k == loop.trips - 1
            results = list(loop.results) if last else []
            if not last:
                for _ in carried:
                    results.append(self._next_local)
                    self._next_local -= 1
            call = plan.Instruction(id=inst.id, mesh=0, stream=0, location=inst.location)
            call.call_recording.recording = loop.recording
            call.call_recording.actuals.extend(carried + list(loop.captured) + induction)
            call.call_recording.results.extend(results)
            self._call_recording(call)
            # This trip's inputs made here: its step tensors and, after the
            # first trip, the previous trip's results.
            for rank in self.refs:
                for r in induction + (carried if k > 0 else []):
                    self.refs[rank].pop(r, None)
            carried = results

    def _call_op(self, rank: int, inst: "plan.Instruction") -> None:
        call = inst.call_op
        results = list(call.results)
        name = call.name.split("::", 1)[1]
        try:
            op = getattr(getattr(torch.ops.aten, name), call.overload or "default")
        except Exception:
            self._fail(rank, inst, results, f"unknown operator {call.name}.{call.overload}")
            return
        try:
            args = [self._value(rank, a) for a in call.args]
            kwargs = {kv.name: self._value(rank, kv.value) for kv in call.kwargs}
            # A full positional list (as plans lowered from IR carry) fills
            # keyword-only arguments too, in schema order.
            schema_args = op._schema.arguments
            positional = [a for a in args]
            args = []
            for i, v in enumerate(positional):
                if i < len(schema_args) and schema_args[i].kwarg_only:
                    kwargs.setdefault(schema_args[i].name, v)
                else:
                    args.append(v)
        except _Dependent as d:
            for r in results:
                self.refs[rank][r] = d.err
            return
        mutated = []
        for i, a in enumerate(op._schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                if i < len(call.args) and call.args[i].WhichOneof("kind") == "ref":
                    mutated.append(call.args[i].ref)
                for kv in call.kwargs:
                    if kv.name == a.name and kv.value.WhichOneof("kind") == "ref":
                        mutated.append(kv.value.ref)
        if self.memory_cap:
            need = self._estimate(op, args, kwargs)
            live = self._live_bytes(rank)
            if need and live + need > self.memory_cap:
                self._fail(
                    rank,
                    inst,
                    results + mutated,
                    f"memory cap exceeded: allocating {need} bytes with {live} bytes in use "
                    f"(cap {self.memory_cap} bytes)",
                )
                return
        try:
            out = op(*args, **kwargs)
        except Exception as e:
            msg = str(e).split("\nException raised from")[0]
            self._fail(rank, inst, results + mutated, msg)
            return
        # As the tensor worker: a `Tensor` return the op left undefined (None)
        # keeps its place and binds an error naming the op, not reported, so
        # only a use of it fails (as a dependent error).
        returns = op._schema.returns
        flat: List[Any] = []
        for i, o in enumerate(out if isinstance(out, (list, tuple)) else [out]):
            if isinstance(o, torch.Tensor):
                flat.append(o)
            elif o is None and i < len(returns) and str(returns[i].type) == "Tensor":
                flat.append(_Err(plan.Failure(
                    instruction=inst.id, rank=rank, location=inst.location,
                    message=f"{call.name}{'.' + call.overload if call.overload else ''} "
                    f"returned no tensor for result {len(flat)} (an undefined tensor, e.g. "
                    "for a false output_mask entry)")))
            elif isinstance(o, (list, tuple)):
                flat.extend(x for x in o if isinstance(x, torch.Tensor))
            elif isinstance(o, (int, float, bool)):
                flat.append(torch.tensor(o))
        for r, t in zip(results, flat):
            self.refs[rank][r] = t

    def _call_function(self, rank: int, inst: "plan.Instruction") -> None:
        """A Python function by name (monarch.remote), as the Python tensor
        worker runs it (_remote_exec)."""
        call = inst.call_function
        results = list(call.results)
        if not call.name.startswith((remote_exec.PREFIX, remote_exec.META_PREFIX)):
            self._fail(rank, inst, results, f"no function registered as '{call.name}'")
            return
        try:
            args = [self._value(rank, a) for a in call.args]
        except _Dependent as d:
            for r in results:
                self.refs[rank][r] = d.err
            return
        try:
            with local():  # the simulated worker runs plain torch
                out = remote_exec.call(call.name, args, call.definition)
            if len(out) != len(results):
                # worded as the C++ executor's
                self._fail(rank, inst, results, f"produced {len(out)} tensors but the "
                           f"instruction binds {len(results)} results")
                return
        except Exception as e:
            self._fail(rank, inst, results, f"{type(e).__name__}: {e}")
            return
        for r, t in zip(results, out):
            self.refs[rank][r] = t

    def _estimate(self, op: Any, args: List[Any], kwargs: Dict[str, Any]) -> int:
        def meta(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="meta")
            if isinstance(x, torch.device):
                return torch.device("meta")
            if isinstance(x, list):
                return [meta(i) for i in x]
            return x

        try:
            margs = [meta(a) for a in args]
            mkw = {k: meta(v) for k, v in kwargs.items()}
            if "device" in [a.name for a in op._schema.arguments]:
                mkw.setdefault("device", torch.device("meta"))
            out = op(*margs, **mkw)
        except Exception:
            return 0
        outs = out if isinstance(out, (list, tuple)) else [out]
        return sum(_nbytes(o) for o in outs)

    def _rank_tensor(self, rank: int, inst: "plan.Instruction") -> None:
        view = self.meshes[inst.mesh]
        coords = view.coords_of(rank)
        dims = list(inst.rank_tensor.dims) or view.names
        value = 0
        for d in dims:
            i = view.lookup(d)
            value = value * view.dims[i].size + coords[i]
        self.refs[rank][inst.rank_tensor.result] = torch.tensor(value, dtype=torch.int64)

    def _delete_refs(self, rank: int, inst: "plan.Instruction") -> None:
        for r in inst.delete_refs.refs:
            self.refs[rank].pop(r, None)

    def _fetch(self, rank: int, inst: "plan.Instruction") -> None:
        v = self.refs[rank].get(inst.fetch.ref)
        reply = plan.FetchReply(instruction=inst.id, rank=rank)
        if v is None:
            reply.error.CopyFrom(
                plan.Failure(instruction=inst.id, rank=rank, location=inst.location,
                             message=f"ref {inst.fetch.ref} is not defined on rank {rank}")
            )
        elif isinstance(v, _Err):
            reply.error.CopyFrom(v.failure)
        else:
            reply.value.CopyFrom(tensor_data(v))
            reply.source_device = str(v.device)
        self._event(rank, fetch=reply)

    def _borrow_create(self, rank: int, inst: "plan.Instruction") -> None:
        b = inst.borrow_create
        v = self.refs[rank].get(b.input)
        self.refs[rank][b.result] = v
        self.borrows[(rank, b.borrow)] = b.result

    def _borrow_drop(self, rank: int, inst: "plan.Instruction") -> None:
        r = self.borrows.pop((rank, inst.borrow_drop.borrow), None)
        if r is not None:
            self.refs[rank].pop(r, None)

    def _reduce(self, inst: "plan.Instruction") -> None:
        red = inst.reduce
        view = self.meshes[inst.mesh]
        dims = list(red.dims)
        op = plan.ReduceOp.Name(red.op).lower()
        meta_dtype = PLAN_TO_DTYPE[red.input_meta.dtype]
        meta_shape = list(red.input_meta.shape)
        done = set()
        for rank in view.ranks():
            if rank in done:
                continue
            group = view.group_of(rank, dims)
            done.update(group)
            inputs = []
            err: Optional[_Err] = None
            for g in group:
                v = self.refs[g].get(red.input)
                if isinstance(v, _Err) or v is None:
                    err = err or (v if isinstance(v, _Err) else None)
                    inputs.append(torch.zeros(meta_shape, dtype=meta_dtype))
                else:
                    inputs.append(v)
            targets = red.out if red.HasField("out") else None
            if err is not None:
                for g in group:
                    self.refs[g][red.input if red.in_place else red.result] = err
                    if targets is not None:
                        self.refs[g][targets] = err
                continue
            n = len(group)
            try:
                if op == "stack":
                    stacked = torch.stack(inputs)
                    if red.scatter:
                        outs = []
                        for j in range(n):
                            rows = inputs[0].shape[0] // n
                            outs.append(torch.cat([x[j * rows:(j + 1) * rows] for x in inputs]))
                    else:
                        outs = [stacked.clone() for _ in group]
                else:
                    st = torch.stack(inputs)
                    if op == "sum":
                        total = st.sum(0)
                    elif op == "avg":
                        total = st.sum(0)
                        if total.dtype.is_floating_point or total.dtype.is_complex:
                            total = total / n
                        else:
                            total = torch.div(total, n, rounding_mode="trunc")
                    elif op == "min":
                        total = st.min(0).values
                    elif op == "max":
                        total = st.max(0).values
                    else:
                        total = st.prod(0)
                    total = total.to(inputs[0].dtype)
                    if red.scatter:
                        outs = [total[j].clone() for j in range(n)]
                    else:
                        outs = [total.clone() for _ in group]
            except Exception as e:
                for g in group:
                    self._fail(g, inst, [red.result], str(e))
                continue
            for g, o in zip(group, outs):
                if red.in_place:
                    self.refs[g][red.input].copy_(o)
                elif targets is not None:
                    self.refs[g][targets].copy_(o)
                    self.refs[g][red.result] = self.refs[g][targets]
                else:
                    self.refs[g][red.result] = o

    def _send(self, inst: "plan.Instruction") -> None:
        st = inst.send_tensor
        src = self.meshes[st.source_mesh]
        dst = self.meshes[st.dest_mesh]
        for d_rank in dst.ranks():
            coords = dst.coords_of(d_rank)
            named = {dst.dims[i].name: c for i, c in enumerate(coords)}
            s_rank = src.rank_at([named[d.name] for d in src.dims])
            v = self.refs[s_rank].get(st.input)
            if isinstance(v, _Err) or v is None:
                self.refs[d_rank][st.result] = v
            else:
                self.refs[d_rank][st.result] = v.clone()
