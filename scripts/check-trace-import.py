#!/usr/bin/env python3
"""Checks the trace import against the old hand-printing tracer, program by program.

For each program of test/python/programs.py (and a few here that reach the
corners: mesh slices sent with to_mesh, flatten, split, out=, reduce_,
constants, Tensor?[] indices, borrows, autograd's undefined results), this

  1. runs it eagerly on the in-process simulation of the workers, recording
     every Instruction the eager path sends, the type of every ref it makes,
     every mesh derivation and the schema of every ATen call with keyword or
     defaulted arguments: a TracedProgram (runtime/tensor/proto/trace.proto);
  2. traces it with the old tracer (monarch.trace: MLIR printed by hand);
  3. checks that `monarch-opt prog.trace` prints the same IR as the old
     tracer's text parses to, and that both lower to the same plan. Two
     differences are expected and allowed: the old tracer left dead mesh ops
     behind for slice_mesh (compared after --canonicalize), and a
     slice_mesh range is spelled from the views the plan records, not as the
     user wrote it (`gpu = 0:4:2` and `gpu = 0::2` are one slice; the plans
     are compared exactly).

The recording side (1) is a sketch of what the frontend's tracer records; it
hooks frontend internals, so it is a transitional check for the time both
tracers exist. Run with Debian's Python (torch, protobuf) after building the
compiler:

    /usr/bin/python3 scripts/check-trace-import.py [PROGRAM ...]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "frontend", "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "python"))

import torch  # noqa: E402

import monarch  # noqa: E402
from monarch import _eager, _proc_mesh, _session, _tensor, _values  # noqa: E402
from monarch._plan import plan  # noqa: E402
from monarch.actor import this_host  # noqa: E402

import programs  # noqa: E402

OPT = os.environ.get("MONARCH_OPT", os.path.join(ROOT, "build", "bin", "monarch-opt"))


def _trace_pb2():
    # trace.proto imports plan.proto: let it find the frontend's plan module.
    out = tempfile.mkdtemp()
    subprocess.run(["protoc", f"--python_out={out}",
                    f"-I{os.path.join(ROOT, 'runtime', 'tensor', 'proto')}", "trace.proto"],
                   check=True)
    sys.modules["plan_pb2"] = plan
    sys.path.insert(0, out)
    import trace_pb2  # type: ignore

    return trace_pb2


trace_pb2 = _trace_pb2()

# -- recording the eager path -----------------------------------------------------

_sent, _types, _derivations, _schemas, _sessions = [], {}, [], {}, []


def _install_hooks() -> None:
    send = _session.Session.send

    def recording_send(self, inst):
        _sent.extend(self._flush_deletes())
        _sent.append(inst)
        send(self, inst)

    _session.Session.send = recording_send

    new_dtensor = _tensor._new_dtensor

    def typed_new_dtensor(fake, mesh, stream, device=None):
        d = new_dtensor(fake, mesh, stream, device)
        _types[d._ref.id] = (fake.dtype, list(fake.shape))
        return d

    _tensor._new_dtensor = typed_new_dtensor

    derive = _proc_mesh.ProcMesh._derive

    def recording_derive(self, kind, args):
        child = derive(self, kind, args)
        _derivations.append((self._view, child._view, kind, args))
        return child

    _proc_mesh.ProcMesh._derive = recording_derive

    op = _eager.EagerSink.op

    def recording_op(self, func, args, kwargs, results, consts, mesh, stream, loc):
        s = func._schema
        key = (s.name, s.overload_name)
        if (kwargs or len(args) < len(s.arguments)) and key not in _schemas:
            schema = trace_pb2.OpSchema(name=s.name, overload=s.overload_name)
            for a in s.arguments:
                arg = schema.arguments.add(name=a.name)
                if a.has_default_value():
                    arg.default_value.CopyFrom(
                        _values.to_value(a.default_value, str(a.type), lambda t: 0))
            _schemas[key] = schema
        _sessions.append(self.s)
        return op(self, func, args, kwargs, results, consts, mesh, stream, loc)

    _eager.EagerSink.op = recording_op


def record(fn, *args):
    """Runs fn eagerly (sim backend) and returns the TracedProgram it sent."""
    for x in (_sent, _derivations, _sessions):
        x.clear()
    _types.clear()
    _schemas.clear()
    fn(*args)
    session = _sessions[0]
    t = trace_pb2.TracedProgram(magic=0x4D4F4E54, version=1, entry="main")
    t.program.magic, t.program.version = 0x4D4F4E50, 1
    for name, size in session.shape:
        t.program.root.add(name=name, size=size)
    t.program.instructions.extend(_sent)
    for ref, (dtype, shape) in sorted(_types.items()):
        t.refs.add(ref=ref, meta=plan.TensorMeta(dtype=_values.DTYPE_TO_PLAN[dtype], shape=shape))
    # Views no instruction ran on get ids of their own: the import derives them.
    ids = dict(session.mesh_ids)
    next_id = max(ids.values()) + 1
    derived = set()
    for parent, child, kind, a in _derivations:
        for v in (parent, child):
            if v not in ids:
                ids[v], next_id = next_id, next_id + 1
        if ids[child] in derived or ids[child] == 0:
            continue
        derived.add(ids[child])
        o = t.mesh_origins.add(mesh=ids[child], parent=ids[parent])
        if kind == "rename":
            for old, new in a.items():
                getattr(o.rename, "from").append(old)
                o.rename.to.append(new)
        elif kind == "split":
            dims, sizes = a
            for name, into in dims.items():
                o.split.dims.add(name=name, into=list(into))
            for name, size in sizes.items():
                o.split.sizes.add(name=name, size=size)
        elif kind == "slice":
            for dim, v in a.items():
                c = o.slice.coords.add(dim=dim)
                if isinstance(v, (slice, range)):
                    if v.start is not None:
                        c.range.start = v.start
                    if v.stop is not None:
                        c.range.stop = v.stop
                    c.range.step = 1 if v.step is None else v.step
                else:
                    c.index = v
        else:
            o.flatten.name = a
    t.schemas.extend(_schemas.values())
    return t


# -- programs beyond test/python/programs.py ------------------------------------------


def meshes(backend):
    mesh = this_host().spawn_procs({"host": 2, "gpu": 4}, backend=backend)
    a = mesh.slice(host=0)
    b = mesh.split(gpu=("x", "y"), y=2).slice(host=1, y=slice(0, 1))
    f = mesh.slice(host=1).flatten("r")
    with mesh.activate():
        full = torch.ones(3) * mesh.rank(("host", "gpu"))
        part = full.slice_mesh(host=1).to_mesh(a)
        c = mesh.slice(host=1, gpu=slice(1, 3))
        part2 = full.slice_mesh(host=0, gpu=slice(0, 4, 2)).to_mesh(c)
    with b.activate():
        bx = b.rank(("x", "y")) + 1
    with f.activate():
        r = f.rank("r").float()
        r.add_(torch.tensor(3.0))
        s = r.reduce("r", "sum")
        o = torch.zeros(())
        r.reduce("r", "max", out=o)
        picked = torch.arange(8.0).reshape(4, 2)[torch.arange(2), None]
    with mesh.activate():
        t = torch.ones(4)
        t2, borrow = monarch.Stream("comm").borrow(t, mutable=True)
        with t2.stream.activate():
            t2.mul_(2)
            t2.reduce_("gpu", "sum")
        borrow.drop()
    return [monarch.inspect(part, gpu=2), monarch.inspect(part2, gpu=1),
            monarch.inspect(bx, x=1), monarch.inspect(s, r=3), monarch.inspect(o),
            monarch.inspect(picked), monarch.inspect(t, host=1, gpu=3)]


def grads(backend):
    mesh = this_host().spawn_procs({"gpu": 1}, backend=backend)
    with mesh.activate():
        ln = torch.nn.LayerNorm(4)
        x = torch.arange(8.0).reshape(2, 4)
        gw, gb = torch.autograd.grad((ln(x) * x).sum(), [ln.weight, ln.bias])
    return [monarch.inspect(gw), monarch.inspect(gb)]


PROGRAMS = {
    "matmul": (programs.matmul, ()),
    "reduce": (programs.reduce, ()),
    "rename_split": (programs.rename_split, ()),
    "pipeline": (programs.pipeline, ()),
    "ddp": (programs.ddp, ()),
    "ddp_comms": (programs.ddp, (True,)),
    "failure": (programs.failure, ()),
    "meshes": (meshes, ()),
    "grads": (grads, ()),
}


def _without_slice_coords(ir):
    return re.sub(r"(monarch\.slice_mesh %\S+) \([^)]*\)", r"\1 (...)", ir)


def opt(path, *flags):
    p = subprocess.run([OPT, path, *flags], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"monarch-opt {path} {' '.join(flags)}:\n{p.stderr}")
    return p.stdout


def main(names):
    _install_hooks()
    failed = False
    work = tempfile.mkdtemp()
    for name in names or PROGRAMS:
        fn, args = PROGRAMS[name]
        traced = os.path.join(work, f"{name}.trace")
        old = os.path.join(work, f"{name}.mlir")
        with open(traced, "wb") as f:
            f.write(record(fn, "sim", *args).SerializeToString())
        with open(old, "w") as f:
            f.write(monarch.trace(fn, "sim", *args).to_mlir())
        plan_flags = ("--monarch-emit-plan=format=text", "-o", os.devnull)
        same_plan = opt(old, *plan_flags) == opt(traced, *plan_flags)
        if opt(old) == opt(traced):
            ir = "same IR"
        elif opt(old, "--canonicalize") == opt(traced, "--canonicalize"):
            ir = "same IR after --canonicalize"
        elif _without_slice_coords(opt(old, "--canonicalize")) == _without_slice_coords(
                opt(traced, "--canonicalize")):
            ir = "same IR after --canonicalize, slice_mesh ranges spelled apart"
        else:
            ir = "IR DIFFERS"
        ok = same_plan and ir != "IR DIFFERS"
        failed |= not ok
        print(f"{name}: {ir}, {'same plan' if same_plan else 'PLAN DIFFERS'}"
              f"{'' if ok else f' (inputs kept in {work})'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
