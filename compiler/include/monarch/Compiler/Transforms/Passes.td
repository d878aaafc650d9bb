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

#endif // MONARCH_COMPILER_PASSES_TD
