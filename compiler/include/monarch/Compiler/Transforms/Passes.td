//===- Passes.td - Passes of the monarch compiler ----------*- tablegen -*-===//
#ifndef MONARCH_COMPILER_PASSES_TD
#define MONARCH_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

def ResolveMeshViews : Pass<"monarch-resolve-mesh-views"> {
  let summary = "Rewrite every mesh view as one monarch.view of its root";
  let description = [{
    Replaces each `monarch.rename` / `split` / `slice` / `flatten` (and
    chains of them) by a single `monarch.view` of the root mesh with the
    statically resolved offset, sizes and strides (DESIGN.md §6.1), the form
    the plan lowering consumes. A block argument of mesh type counts as a
    root (its layout relative to the caller's root is the caller's business).

    Before:
    ```mlir
    %m = monarch.spawn_procs : !monarch.mesh<host = 60, gpu = 24>
    %v = monarch.split %m (host -> [dp, pp], gpu -> [tp], pp = 4)
        : !monarch.mesh<host = 60, gpu = 24>
    %s = monarch.slice %v (pp = 1) : !monarch.mesh<dp = 15, pp = 4, tp = 24>
    ```
    After:
    ```mlir
    %m = monarch.spawn_procs : !monarch.mesh<host = 60, gpu = 24>
    %s = monarch.view %m offset 24 (dp = 15:96, tp = 24:1)
        : !monarch.mesh<host = 60, gpu = 24>
    ```
  }];
  let dependentDialects = ["::monarch::MonarchDialect"];
}

def PrintMeshLayout : Pass<"monarch-print-mesh-layout"> {
  let summary = "Report the resolved layout of every mesh value (test pass)";
  let description = [{
    Emits a remark on every op producing a `!monarch.mesh`, giving the
    layout computed by MeshLayoutAnalysis: the root (numbered in order of
    appearance) and `offset=O name=size:stride ...`. Used by lit tests with
    `-verify-diagnostics`.

    Input:
    ```mlir
    %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
    %s = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
    ```
    Remarks:
    ```
    remark: mesh layout: root #0, offset=0 host=2:4 gpu=4:1
    remark: mesh layout: root #0, offset=4 gpu=4:1
    ```
  }];
}

def VerifyBorrows : Pass<"monarch-verify-borrows"> {
  let summary = "Check the borrow rules of DESIGN.md §6.4 statically";
  let description = [{
    For each `monarch.borrow`, within its block and up to its
    `monarch.borrow_drop` (or the end of the block when it is never dropped),
    reports as errors, with Monarch's categories:

    - `BORROWED`: a use of the origin tensor while it is borrowed mutably;
    - `DROPPED`: a use of the borrowed tensor after the drop;
    - `would be mutated`: a mutation of the origin or of the borrowed tensor
      while the borrow is read-only (a `monarch.reduce ... inplace` or `into`,
      or an in-place ATen op, whose name ends in `_`: `aten::add_.Tensor`);
    - a mutable borrow of a tensor that is borrowed read-only;
    - borrow events out of order (first use after last use, any event after
      the drop, a second drop).

    Uses inside nested regions count at the position of their ancestor op in
    the borrow's block. Aliasing through in-place results (a later SSA value of
    the same storage) is not tracked.

    Input:
    ```mlir
    %t2, %b = monarch.borrow %t to %s mutable : !monarch.tensor<4xf32, <gpu = 8>>
        -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
    %x = monarch.aten "aten::neg"(%t) on %m : ...   // origin used: BORROWED
    monarch.borrow_drop %b
    %y = monarch.aten "aten::neg"(%t2) on %m : ...  // borrowed used: DROPPED
    ```
    Diagnostics:
    ```
    error: BORROWED: operand #0 is mutably borrowed by stream "comm" until its drop
    error: DROPPED: operand #0 is a borrowed tensor used after its borrow was dropped
    ```
  }];
}

def PrintCost : Pass<"monarch-print-cost"> {
  let summary = "Report the cost model's estimate of every op (test pass)";
  let description = [{
    Emits a remark on every op with device work giving the CostModel's
    estimate: FLOPs, bytes and seconds of ATen ops (a roofline over the
    local shapes), and the collective kind, group size, payload and
    alpha-beta time of collectives. `device` picks the defaults
    (`h200`, `a100`, `cpu`); `profile` loads a JSON profile instead.

    Input:
    ```mlir
    %c = monarch.aten "aten::mm"(%a, %b) on %m : (!monarch.tensor<64x32xf32, <gpu = 8>>,
        !monarch.tensor<32x16xf32, <gpu = 8>>) -> !monarch.tensor<64x16xf32, <gpu = 8>>
    %r = monarch.reduce %c (gpu) sum : !monarch.tensor<64x16xf32, <gpu = 8>> -> ...
    ```
    Remarks (device=cpu):
    ```
    remark: compute: flops=65536 bytes=16384 time=2.655us
    remark: all_reduce over 8 ranks: bytes=4096 time=707.4us
    ```
  }];
  let options = [
    Option<"device", "device", "std::string", "\"h200\"",
           "Device kind whose defaults the cost model uses (h200, a100, cpu)">,
    Option<"profile", "profile", "std::string", "\"\"",
           "JSON cost profile measured on a machine (overrides device)">,
  ];
}

def AsyncCollectives : Pass<"monarch-async-collectives"> {
  let summary = "Split reduce / to_mesh into *_start + wait";
  let description = [{
    Rewrites every `monarch.reduce` into a `monarch.reduce_start` returning
    a `!monarch.async` token and a `monarch.wait` placed immediately after
    it, and every `monarch.to_mesh` into `monarch.to_mesh_start` + `wait`;
    the uses of the result use the wait's. The program means the same;
    `--monarch-schedule-overlap` then moves starts and waits apart.

    Before:
    ```mlir
    %r = monarch.reduce %g (dp) sum inplace : !monarch.tensor<4xf32, <dp = 8>>
        -> !monarch.tensor<4xf32, <dp = 8>>
    ```
    After:
    ```mlir
    %tok = monarch.reduce_start %g (dp) sum inplace : !monarch.tensor<4xf32, <dp = 8>>
        -> !monarch.async<!monarch.tensor<4xf32, <dp = 8>>>
    %r = monarch.wait %tok : !monarch.async<!monarch.tensor<4xf32, <dp = 8>>>
    ```
  }];
  let dependentDialects = ["::monarch::MonarchDialect"];
}

def ScheduleOverlap : Pass<"monarch-schedule-overlap"> {
  let summary = "List-schedule each block to overlap collectives with compute";
  let description = [{
    Reorders the ops of every block holding a `monarch.reduce_start` or
    `monarch.to_mesh_start` so that each start is issued as soon as its
    input is ready, each `monarch.wait` sinks to just before its first use,
    and independent compute fills the gap. Dependencies kept: SSA uses
    (also from nested regions), reads and writes of the same tensor storage
    (in-place ATen ops, `reduce ... inplace` / `into`, and the aliases they
    return; a to_mesh copy reads its source until its wait), the order of
    collectives of one communicator (same mesh, same dims: every rank must
    issue them in the same order), the order of fetches, endpoint calls,
    RNG ops and calls, and any op with unknown side effects is a barrier.
    The ready waits are issued in order of the completion time the cost
    model predicts. `max-in-flight` caps the number of started collectives
    not yet waited for (0: no cap).

    Before (after --monarch-async-collectives):
    ```mlir
    %g1 = monarch.aten "aten::mm"(%d, %x1) on %m : ...
    %t1 = monarch.reduce_start %g1 (dp) sum inplace : ...
    %r1 = monarch.wait %t1 : ...
    %p1u = monarch.aten "aten::sub_.Tensor"(%p1, %r1, ...) on %m : ...
    %g0 = monarch.aten "aten::mm"(%d2, %x0) on %m : ...
    ```
    After:
    ```mlir
    %g1 = monarch.aten "aten::mm"(%d, %x1) on %m : ...
    %t1 = monarch.reduce_start %g1 (dp) sum inplace : ...
    %g0 = monarch.aten "aten::mm"(%d2, %x0) on %m : ...
    %r1 = monarch.wait %t1 : ...
    %p1u = monarch.aten "aten::sub_.Tensor"(%p1, %r1, ...) on %m : ...
    ```
  }];
  let options = [
    Option<"maxInFlight", "max-in-flight", "unsigned", "0",
           "Most collectives started and not yet waited for (0: no limit)">,
    Option<"device", "device", "std::string", "\"h200\"",
           "Device kind of the cost model (h200, a100, cpu)">,
    Option<"profile", "profile", "std::string", "\"\"",
           "JSON cost profile (overrides device)">,
  ];
}

def PipelineSchedule : Pass<"monarch-pipeline-schedule"> {
  let summary = "Order a pipeline's per-microbatch forward/backward by stage (GPipe or 1F1B)";
  let description = [{
    Reorders the ops of a block that moves tensors between stage meshes with
    `monarch.to_mesh` so that each stage runs its microbatches in the order
    of a pipeline schedule. Every worker executes the ops of its own mesh in
    program order, so the ops of one stage mesh, in order, are that stage's
    schedule; the pass emits one global (topological) order, which keeps both
    sides of every transfer matched.

    Stages are the meshes joined by `to_mesh` (the first transfer between two
    gives the forward direction; they must form one chain). The k-th forward
    (backward) transfer across a boundary carries microbatch k; an op belongs
    to the first outgoing transfer it helps compute, else to the latest
    incoming transfer it depends on. Fetches split the program into steps
    that are never mixed. Stage s of P runs, with warm-up w = P - s:
    `gpipe`: F0 .. F(m-1), B0 .. B(m-1); `1f1b`: F0 .. F(w-1), then B0, Fw,
    B1, F(w+1), ... Dependencies kept: SSA uses, in-place writes and their
    aliases, the order of each communicator's collectives, of fetches and of
    RNG ops; unknown side effects are barriers. A block that is not a chain of
    stages is left unchanged (a remark with `report=true`).

    Before (2 stages, GPipe order as traced; one line per microbatch unit):
    ```mlir
    %a0 = ... forward of mb 0 on %s0 ...;  %r0 = monarch.to_mesh %a0 to %s1
    %a1 = ... forward of mb 1 on %s0 ...;  %r1 = monarch.to_mesh %a1 to %s1
    %g0 = ... forward+backward of mb 0 on %s1 ...;  %q0 = monarch.to_mesh %g0 to %s0
    %g1 = ... forward+backward of mb 1 on %s1 ...;  %q1 = monarch.to_mesh %g1 to %s0
    ... backward of mb 0 on %s0 (uses %q0) ... backward of mb 1 on %s0 ...
    ```
    After `--monarch-pipeline-schedule=schedule=1f1b` (stage 1: F0 B0 F1 B1):
    ```mlir
    ... forward mb 0 on %s0 ...;  %r0 = monarch.to_mesh %a0 to %s1
    ... forward mb 1 on %s0 ...;  %r1 = monarch.to_mesh %a1 to %s1
    ... forward+backward mb 0 on %s1 ...;  %q0 = monarch.to_mesh %g0 to %s0
    ... backward mb 0 on %s0 ...
    ... forward+backward mb 1 on %s1 ...;  %q1 = monarch.to_mesh %g1 to %s0
    ... backward mb 1 on %s0 ...
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "Pipeline schedule: gpipe or 1f1b">,
    Option<"report", "report", "bool", "false",
           "Emit a remark per block: stages and transfers found, or why it was left unchanged">,
  ];
  let dependentDialects = ["::monarch::MonarchDialect"];
}

def BucketCollectives : Pass<"monarch-bucket-collectives"> {
  let summary = "Merge small in-place all-reduces into one flat buffer";
  let description = [{
    Runs after `--monarch-schedule-overlap`. Consecutive in-place
    all-reduces (`reduce_start ... inplace` without `scatter`, not `stack`)
    of one communicator, with the same reduction, element type and mesh,
    whose tensors are each at most `max-bytes` and together at most
    `max-bytes`, become one: their tensors are flattened and concatenated
    (`aten::reshape`, `aten::cat`) where the last of them started, one
    all-reduce runs on the flat buffer, and where the first of them was
    waited for, the buffer is split (`aten::split_with_sizes`) and copied
    back (`aten::view`, `aten::copy_`). A reduce joins a bucket only if
    nothing between the bucket's first start and its own touches the
    tensors already in it, and their waits all come after it; the tensors'
    producers must name a mesh (`on %m`).

    Before:
    ```mlir
    %t1 = monarch.reduce_start %g1 (dp) sum inplace : !monarch.tensor<4xf32, <dp = 8>> -> ...
    %t2 = monarch.reduce_start %g2 (dp) sum inplace : !monarch.tensor<2x3xf32, <dp = 8>> -> ...
    %r1 = monarch.wait %t1 : ...
    %r2 = monarch.wait %t2 : ...
    ```
    After:
    ```mlir
    %f1 = monarch.aten "aten::reshape"(%g1, array<i64: -1>) on %m : ... -> !monarch.tensor<4xf32, <dp = 8>>
    %f2 = monarch.aten "aten::reshape"(%g2, array<i64: -1>) on %m : ... -> !monarch.tensor<6xf32, <dp = 8>>
    %flat = monarch.aten "aten::cat"([%f1, %f2], 0 : i64) on %m : ... -> !monarch.tensor<10xf32, <dp = 8>>
    %t = monarch.reduce_start %flat (dp) sum inplace : ...
    %w = monarch.wait %t : ...
    %p:2 = monarch.aten "aten::split_with_sizes"(%w, array<i64: 4, 6>, 0 : i64) on %m : ...
    %v1 = monarch.aten "aten::view"(%p#0, array<i64: 4>) on %m : ...
    %r1 = monarch.aten "aten::copy_"(%g1, %v1, false) on %m : ...
    %v2 = monarch.aten "aten::view"(%p#1, array<i64: 2, 3>) on %m : ...
    %r2 = monarch.aten "aten::copy_"(%g2, %v2, false) on %m : ...
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "uint64_t", "26214400",
           "Largest bucket in bytes (PyTorch DDP's 25 MiB by default)">,
  ];
  let dependentDialects = ["::monarch::MonarchDialect"];
}

def AssignStreams : Pass<"monarch-assign-streams"> {
  let summary = "Run collectives and to_mesh copies on a comm stream with borrows";
  let description = [{
    Moves collectives and transfers onto the stream `stream` (default
    "comm"), so that they run concurrently with the compute of the default
    stream, and inserts the borrow protocol of DESIGN.md §6.4 that makes it
    legal. Each start and its `monarch.wait` move together, the wait right
    after its start (the comm stream runs its ops in order); starts keep
    their program order, so no communicator sees its collectives or
    transfers reordered. One `monarch.stream_create` per stream and function
    is added at its entry. Only ops on tensors the default stream owns move.

    An in-place `monarch.reduce_start` runs on a mutable borrow of its
    tensor: `monarch.borrow ... mutable` and `borrow_first_use` just before
    the start, `borrow_last_use` just after the wait, and the `borrow_drop`
    as late as correct: just before the next op that uses the tensor (or the
    end of the block). Uses of the wait's result are replaced by the origin
    tensor, which holds the reduced value after the drop.

    A copy — `monarch.to_mesh_start` (option `to-mesh`, on) or an
    out-of-place `reduce_start` without `into` (option `out-of-place`, on) —
    only reads its input until the wait, so the input is borrowed read-only:
    the origin stream may keep reading it, and the drop goes just before the
    next op that may write it or the next start, whichever comes first (or
    the end of the block). The result is received on the comm stream and
    lent back to the default stream by a mutable borrow: `borrow_first_use`
    just before its first use (the default stream waits for the copy only
    there), `borrow_last_use` after its last use, `borrow_drop` (the comm
    stream waits for that last use) just before the next start after it (or
    the end of the block): a borrow keeps its tensor alive, and an unrolled
    program would otherwise keep every transferred tensor to its end. A copy
    whose result leaves the block (returned, yielded) stays where it was.

    Before:
    ```mlir
    %t = monarch.reduce_start %g (dp) sum inplace : !monarch.tensor<4xf32, <dp = 8>>
        -> !monarch.async<!monarch.tensor<4xf32, <dp = 8>>>
    %x = monarch.aten "aten::neg"(%y) on %m : ...
    %r = monarch.wait %t : !monarch.async<!monarch.tensor<4xf32, <dp = 8>>>
    %u = monarch.aten "aten::sub_.Tensor"(%p, %r, #monarch.scalar<1 : i64>) on %m : ...
    %c = monarch.to_mesh_start %a to %stage1 : !monarch.tensor<4xf32, <x = 2>>
        -> !monarch.async<!monarch.tensor<4xf32, <x = 2>>>
    %d = monarch.wait %c : !monarch.async<!monarch.tensor<4xf32, <x = 2>>>
    %e = monarch.aten "aten::relu"(%d) on %stage1 : ...
    return
    ```
    After:
    ```mlir
    %comm = monarch.stream_create : !monarch.stream<"comm">
    %main = monarch.stream_create : !monarch.stream<"">
    %g2, %b = monarch.borrow %g to %comm mutable : !monarch.tensor<4xf32, <dp = 8>>
        -> !monarch.tensor<4xf32, <dp = 8>, stream = "comm">
    monarch.borrow_first_use %b
    %t = monarch.reduce_start %g2 (dp) sum inplace : ... stream = "comm"> -> ...
    %r = monarch.wait %t : ...
    monarch.borrow_last_use %b
    %x = monarch.aten "aten::neg"(%y) on %m : ...
    monarch.borrow_drop %b
    %u = monarch.aten "aten::sub_.Tensor"(%p, %g, #monarch.scalar<1 : i64>) on %m : ...
    %a2, %ba = monarch.borrow %a to %comm : ... -> ... stream = "comm">
    monarch.borrow_first_use %ba
    %c = monarch.to_mesh_start %a2 to %stage1 : ... stream = "comm"> -> ...
    %d = monarch.wait %c : ...
    monarch.borrow_last_use %ba
    %d2, %bd = monarch.borrow %d to %main mutable : !monarch.tensor<4xf32, <x = 2>, stream = "comm">
        -> !monarch.tensor<4xf32, <x = 2>>
    monarch.borrow_first_use %bd
    %e = monarch.aten "aten::relu"(%d2) on %stage1 : ...
    monarch.borrow_last_use %bd
    monarch.borrow_drop %bd
    monarch.borrow_drop %ba
    return
    ```
  }];
  let options = [
    Option<"stream", "stream", "std::string", "\"comm\"",
           "Name of the stream collectives run on">,
    Option<"toMesh", "to-mesh", "bool", "true",
           "Also move to_mesh transfers onto the stream">,
    Option<"outOfPlace", "out-of-place", "bool", "true",
           "Also move out-of-place reduces onto the stream">,
  ];
  let dependentDialects = ["::monarch::MonarchDialect"];
}

def Simulate : Pass<"monarch-simulate"> {
  let summary = "Predict each function's timeline with the cost model";
  let description = [{
    Replays every function in program order on a model of the workers: one
    in-order queue per stream, ops starting when their stream is free and
    their operands are ready, collectives occupying the stream they are
    issued on until done, `monarch.wait` making its stream wait for the
    collective, borrow first use / drop making the borrowing / origin stream
    wait for the other's events. Emits a remark on each function with the
    predicted step time, each stream's busy time and the fraction of
    collective time overlapped with compute, and with `trace-file` writes
    the timeline as Chrome trace JSON (chrome://tracing, ui.perfetto.dev).
    Loop bodies are counted once. The IR is not changed.

    Remark:
    ```
    remark: simulated step 1.234ms; stream "": busy 1.100ms;
        stream "comm": busy 0.400ms; overlap 0.85
    ```
  }];
  let options = [
    Option<"traceFile", "trace-file", "std::string", "\"\"",
           "Write the predicted timeline as Chrome trace JSON to this path">,
    Option<"device", "device", "std::string", "\"h200\"",
           "Device kind of the cost model (h200, a100, cpu)">,
    Option<"profile", "profile", "std::string", "\"\"",
           "JSON cost profile (overrides device)">,
  ];
}

def MarkCudaGraphs : Pass<"monarch-mark-cuda-graphs", "::mlir::ModuleOp"> {
  let summary = "Mark the recordings a worker may run as CUDA graphs";
  let description = [{
    A recording (the body of a counted `scf.for`, or a function called from
    the entry, each lowered to one DefineRecording) whose body holds at
    least `min-ops` `monarch.aten` calls gets the unit attribute
    `monarch.cuda_graph`, and the lowering marks its plan recording a
    CUDA-graph candidate (plan.proto's `Recording.cuda_graph`). On a CUDA
    stream the worker then captures the body's stretches of ATen calls as
    CUDA graphs at their first calls and replays them after
    (docs/plan.md, "CUDA graphs"); what cannot be captured (fetches,
    host syncs, collectives, transfers, CPU tensors) stays op by op, as
    without the mark. Part of `monarch-default-pipeline` unless
    `cuda-graphs=off`.

    Before:
    ```mlir
    %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%x = %x0) -> (!T) {
      %a = monarch.aten "aten::add.Tensor"(%x, %x) on %m : (!T, !T) -> !T
      %b = monarch.aten "aten::mul.Tensor"(%a, %x) on %m : (!T, !T) -> !T
      scf.yield %b : !T
    }
    ```
    After: the same loop with `{monarch.cuda_graph}`.
  }];
  let options = [
    Option<"minOps", "min-ops", "unsigned", "2",
           "Fewest ATen calls a recording's body holds to be a candidate">,
  ];
}

#endif // MONARCH_COMPILER_PASSES_TD
