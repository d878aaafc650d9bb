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

#endif // MONARCH_COMPILER_PASSES_TD
