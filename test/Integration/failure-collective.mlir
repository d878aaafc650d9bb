// A collective whose input is an error on one rank: DESIGN.md §6.5 -- the
// erroring rank takes part with zeros (so nobody hangs) and the result is an
// error on every member: the reduce's value depends on the failed shard, so
// rank 0 gets a dependent error naming the root failure on rank 1, not a
// value computed with zeros (7 + 0).
// RUN: %expect-exit 1 monarch-run %s > %t.out
// RUN: FileCheck %s < %t.out

!S = !monarch.tensor<f32, <gpu = 2>>

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %g = monarch.rank %m (gpu) : !monarch.tensor<i64, <gpu = 2>>
  %v = monarch.aten "aten::arange.start"(#monarch.scalar<7 : i64>, #monarch.scalar<8 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<1xf32, <gpu = 2>>
  // Fails on rank 1 only: index 1 of a 1-element tensor.
  %p = monarch.aten "aten::index.Tensor"(%v, [%g]) on %m : (!monarch.tensor<1xf32, <gpu = 2>>, !monarch.tensor<i64, <gpu = 2>>) -> !S
  %q = monarch.reduce %p (gpu) sum : !S -> !S
  // CHECK:      fetch #{{[0-9]+}} rank 0 (gpu=0): error: instruction #[[IX:[0-9]+]] (at {{.*}}failure-collective.mlir:{{[0-9]+}}:{{[0-9]+}}) failed on rank 1: index 1 is out of bounds for dimension 0 with size 1
  // CHECK-NEXT: fetch #{{[0-9]+}} rank 1 (gpu=1): error: instruction #[[IX]] (at {{.*}}) failed on rank 1: index 1 is out of bounds
  %f0 = monarch.fetch_shard %q : !S -> !monarch.host<tensor<f32>>
  %f1 = monarch.fetch_shard %q at (gpu = 1) : !S -> !monarch.host<tensor<f32>>
  return
}
