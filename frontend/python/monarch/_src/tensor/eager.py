"""Eager execution: each captured operation becomes one plan Instruction on
the session's stream (ops the dispatch cache knows go as templates:
dispatch.py; everything else is built here). While tracing the stream
records them, with the local types of the refs they define."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch

from ..backend.plan import plan
from .values import DTYPE_TO_PLAN, to_value

_REDUCE_OPS = {
    "sum": plan.SUM,
    "avg": plan.AVG,
    "min": plan.MIN,
    "max": plan.MAX,
    "product": plan.PRODUCT,
    "stack": plan.STACK,
}


def tensor_meta(t: Any) -> "plan.TensorMeta":
    return plan.TensorMeta(dtype=DTYPE_TO_PLAN[t.dtype], shape=list(t.shape))


def types_of(results: Sequence[Any]) -> List[Tuple[int, int, List[int]]]:
    """(ref, dtype code, shape) of results: what a traced program records."""
    return [(r._ref.id, int(DTYPE_TO_PLAN[r.dtype]), list(r.shape)) for r in results]


class EagerSink:
    def __init__(self, session: Any):
        self.s = session

    def _ids(self, mesh: Any, stream: Any) -> Tuple[int, int]:
        return self.s.mesh_id_of(mesh), self.s.stream_id(stream.ir_name)

    def op(self, func: Any, args: Tuple, kwargs: Dict[str, Any], results: List[Any],
           consts: Dict[int, torch.Tensor], mesh: Any, stream: Any, loc: str) -> None:
        mid, sid = self._ids(mesh, stream)
        inst = self.s.instruction(mid, sid, loc)
        schema = func._schema
        call = inst.call_op
        call.name = schema.name
        call.overload = schema.overload_name

        def ref_of(t: Any) -> int:
            return t._ref.id

        def conv(x: Any, type_str: str) -> Any:
            # local 0-d tensors travel as constants (TensorData)
            return to_value(x, type_str, ref_of)

        arguments = schema.arguments
        for i, a in enumerate(args):
            call.args.append(conv(a, str(arguments[i].type) if i < len(arguments) else ""))
        by_name = {a.name: a for a in arguments}
        for k, v in kwargs.items():
            nv = call.kwargs.add(name=k)
            nv.value.CopyFrom(conv(v, str(by_name[k].type) if k in by_name else ""))
        call.results.extend(r._ref.id for r in results)
        self.s.note_schema(func)
        self.s.send(inst, types_of(results))

    def call_function(self, name: str, args: Sequence[Any], results: List[Any], mesh: Any,
                      stream: Any, loc: str, definition: bytes = b"") -> None:
        """A function the workers run by name (monarch.remote); ``definition``
        is its by-value pickle when the workers cannot import it."""
        mid, sid = self._ids(mesh, stream)
        inst = self.s.instruction(mid, sid, loc)
        call = inst.call_function
        call.name = name
        if definition:
            call.definition = definition
        for a in args:
            call.args.append(to_value(a, "", lambda t: t._ref.id))
        call.results.extend(r._ref.id for r in results)
        self.s.send(inst, types_of(results))

    def call_actor(self, actor: str, endpoint: str, args: Sequence[Any], results: List[Any],
                   mesh: Any, stream: Any, loc: str, route: Any = None) -> None:
        """An endpoint of the ranks' actors on their local shards (rref): beside
        the workers, or at ``route`` (a plan ActorRoute) in processes of their own."""
        mid, sid = self._ids(mesh, stream)
        inst = self.s.instruction(mid, sid, loc)
        call = inst.call_actor
        call.actor = actor
        call.endpoint = endpoint
        if route is not None:
            call.route.CopyFrom(route)
        for a in args:
            call.args.append(to_value(a, "", lambda t: t._ref.id))
        call.results.extend(r._ref.id for r in results)
        self.s.send(inst, types_of(results))

    def rank(self, mesh: Any, dims: Sequence[str], result: Any, stream: Any, loc: str) -> None:
        mid, sid = self._ids(mesh, stream)
        inst = self.s.instruction(mid, sid, loc)
        inst.rank_tensor.dims.extend(dims)
        inst.rank_tensor.result = result._ref.id
        self.s.send(inst, types_of([result]))

    def reduce(self, t: Any, result: Any, dims: Sequence[str], reduction: str, scatter: bool,
               inplace: bool, out: Any, stream: Any, loc: str) -> None:
        mid, sid = self._ids(t._mesh, stream)
        inst = self.s.instruction(mid, sid, loc)
        r = inst.reduce
        r.input = t._ref.id
        r.result = result._ref.id
        r.dims.extend(dims)
        r.op = _REDUCE_OPS[reduction]
        r.scatter = scatter
        r.in_place = inplace
        if out is not None:
            r.out = out._ref.id
        r.input_meta.CopyFrom(tensor_meta(t))
        self.s.send(inst, types_of([result]) if not inplace else [])

    def send(self, t: Any, result: Any, dest: Any, stream: Any, loc: str) -> None:
        src_id = self.s.mesh_id_of(t._mesh)
        dst_id = self.s.mesh_id_of(dest)
        sid = self.s.stream_id(stream.ir_name)
        inst = self.s.instruction(0, sid, loc)
        st = inst.send_tensor
        st.input = t._ref.id
        st.result = result._ref.id
        st.source_mesh = src_id
        st.dest_mesh = dst_id
        st.meta.CopyFrom(tensor_meta(t))
        self.s.send(inst, types_of([result]))

    def slice_mesh(self, t: Any, result: Any, coords: Dict[str, Any], loc: str) -> None:
        # The slice names the same ref on fewer ranks: nothing to send.
        pass

    def borrow(self, t: Any, result: Any, b: Any, loc: str) -> None:
        mid = self.s.mesh_id_of(t._mesh)
        sid = self.s.stream_id(b._stream.ir_name)
        inst = self.s.instruction(mid, sid, loc)
        bc = inst.borrow_create
        bc.borrow = b.id
        bc.input = t._ref.id
        bc.result = result._ref.id
        bc.from_stream = self.s.stream_id(b._origin_stream.ir_name)
        bc.mutable = b.mutable
        self.s.send(inst, types_of([result]))

    def drop(self, b: Any, loc: str) -> None:
        mid = self.s.mesh_id_of(b._origin_mesh)
        sid = self.s.stream_id(b._origin_stream.ir_name)
        inst = self.s.instruction(mid, sid, loc)
        inst.borrow_drop.borrow = b.id
        self.s.send(inst)

    def fetch(self, t: Any, coords: Dict[str, int], loc: str) -> Any:
        view = t._mesh._view.slice(**coords)
        sid = self.s.stream_id(t._ref.stream.ir_name)
        self.s.mesh_id_of(t._mesh)  # the tensor's mesh is declared (and its origin)
        return self.s.fetch(t._ref.id, view, sid, loc, (tuple(t.shape), t.dtype))
