// A program that does not verify: monarch-run prints the diagnostic (file, line,
// the verifier's message) and launches nothing -- no worker runs, so none of
// them warns about the cuda tensor, and nothing is fetched -- exit status 2.
// RUN: %expect-exit 2 monarch-run %s > %t.out 2> %t.err
// RUN: FileCheck %s < %t.err
// RUN: FileCheck %s --check-prefix=NOLAUNCH --allow-empty < %t.err
// RUN: count 0 < %t.out
// A program that verifies but uses what the lowering cannot run (an actor):
// the same, with the lowering's diagnostic naming the op.
// RUN: %expect-exit 2 monarch-run %S/Inputs/unsupported-op.mlir > %t.op.out 2> %t.op.err
// RUN: FileCheck %s --check-prefix=OP < %t.op.err
// RUN: FileCheck %s --check-prefix=NOLAUNCH --allow-empty < %t.op.err
// RUN: count 0 < %t.op.out

// OP: unsupported-op.mlir:5:8: error: cannot lower 'monarch.spawn_actor' to the plan
// NOLAUNCH-NOT: tensor_procs
// NOLAUNCH-NOT: no GPU
// NOLAUNCH-NOT: fetch
func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 2>
  %t = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %m : () -> !monarch.tensor<4xf32, <host = 2, gpu = 2>>
  // CHECK: verifier-error.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'monarch.reduce' op reduce over unknown mesh dim 'tp' (the mesh has host, gpu)
  %s = monarch.reduce %t (tp) sum : !monarch.tensor<4xf32, <host = 2, gpu = 2>> -> !monarch.tensor<4xf32, <host = 2, gpu = 2>>
  %v = monarch.inspect %s : !monarch.tensor<4xf32, <host = 2, gpu = 2>> -> !monarch.host<tensor<4xf32>>
  return
}
