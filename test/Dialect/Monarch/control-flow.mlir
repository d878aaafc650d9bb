// RUN: monarch-opt %s --verify-roundtrip | FileCheck %s

// Monarch ops inside scf.for and across func.call (DESIGN.md §4).
// CHECK-LABEL: func.func @step
func.func @step(%m: !monarch.mesh<host = 2, gpu = 4>, %w: !monarch.tensor<4xf32, <host = 2, gpu = 4>>) -> !monarch.tensor<4xf32, <host = 2, gpu = 4>> {
  // CHECK: monarch.aten "aten::mul.Scalar"
  %g = monarch.aten "aten::mul.Scalar"(%w, #monarch.scalar<2.0 : f64>) on %m : (!monarch.tensor<4xf32, <host = 2, gpu = 4>>) -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  // CHECK: monarch.reduce %{{.*}} (gpu) avg
  %r = monarch.reduce %g (gpu) avg : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  return %r : !monarch.tensor<4xf32, <host = 2, gpu = 4>>
}

// CHECK-LABEL: func.func @train
func.func @train() -> !monarch.host<tensor<4xf32>> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  // CHECK: %[[M:.*]] = monarch.spawn_procs
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: %[[W0:.*]] = monarch.aten "aten::zeros"
  %w0 = monarch.aten "aten::zeros"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  // CHECK: %[[W:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[W0]]) -> (!monarch.tensor<4xf32, <host = 2, gpu = 4>>)
  %w = scf.for %i = %c0 to %c10 step %c1 iter_args(%acc = %w0) -> (!monarch.tensor<4xf32, <host = 2, gpu = 4>>) {
    // CHECK: %[[N:.*]] = func.call @step(%[[M]], %[[ACC]])
    %n = func.call @step(%m, %acc) : (!monarch.mesh<host = 2, gpu = 4>, !monarch.tensor<4xf32, <host = 2, gpu = 4>>) -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
    // CHECK: scf.yield %[[N]]
    scf.yield %n : !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  }
  // CHECK: monarch.fetch_shard %[[W]] at (gpu = 1)
  %f = monarch.fetch_shard %w at (gpu = 1) : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.host<tensor<4xf32>>
  return %f : !monarch.host<tensor<4xf32>>
}

// The induction variable as a tensor on a mesh (0-d i64, any stream), for a
// body that computes with its step number.
// CHECK-LABEL: func.func @schedule
func.func @schedule() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to
  scf.for %i = %c0 to %c10 step %c1 {
    // CHECK: monarch.index_tensor %[[I]] on %{{.*}} : !monarch.tensor<i64, <gpu = 2>>
    %s = monarch.index_tensor %i on %m : !monarch.tensor<i64, <gpu = 2>>
    // CHECK: monarch.index_tensor %[[I]] on %{{.*}} : !monarch.tensor<i64, <gpu = 2>, stream = "comm">
    %t = monarch.index_tensor %i on %m : !monarch.tensor<i64, <gpu = 2>, stream = "comm">
    %lr = monarch.aten "aten::mul.Scalar"(%s, #monarch.scalar<0.5 : f64>) on %m : (!monarch.tensor<i64, <gpu = 2>>) -> !monarch.tensor<f32, <gpu = 2>>
  }
  return
}
