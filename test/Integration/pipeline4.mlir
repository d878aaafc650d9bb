// RUN: monarch-run %s > %t.out
// RUN: FileCheck %s < %t.out

// A 4-stage pipeline forward on host=4 x gpu=2 (8 worker processes): the hosts
// become pipeline stages (rename host -> pp, stage i = slice(pp = i), a mesh
// <gpu = 2>), each stage runs the same function (a recording per stage mesh),
// activations move between stages with to_mesh, and the last stage reduces
// over gpu.
//   stage(x, w) = relu(x @ w - 2) * 0.5,   w_i = (arange(i, i + 16) % 3 - 0.5).reshape(4, 4)
//   x (on stage 0) = arange(8).reshape(2, 4) + gpu
// Expected values computed with torch (exact binary fractions):
//   gpu 0: stage 0 -> [[0, 0, 1.5, 0], [2, 4, 7.5, 2]]
//          stage 3 -> [[0, 0, 0, 0], [0, 1.390625, 0.171875, 0]]
//   gpu 1: stage 0 -> [[0.5, 1, 3, 0.5], [2.5, 5, 9, 2.5]]
//          stage 3 -> [[0, 0, 0, 0], [0, 2.28125, 1.65625, 0]]
//   sum over gpu of stage 3 -> [[0, 0, 0, 0], [0, 3.671875, 1.828125, 0]]

!T = !monarch.tensor<2x4xf32, <gpu = 2>>
!W = !monarch.tensor<4x4xf32, <gpu = 2>>
!M = !monarch.mesh<gpu = 2>
!H = !monarch.host<tensor<2x4xf32>>

func.func @stage(%s: !M, %x: !T, %w: !W) -> !T {
  %h = monarch.aten "aten::mm"(%x, %w) on %s : (!T, !W) -> !T
  %b = monarch.aten "aten::sub.Scalar"(%h, #monarch.scalar<2 : i64>, #monarch.scalar<1 : i64>) on %s : (!T) -> !T
  %r = monarch.aten "aten::relu"(%b) on %s : (!T) -> !T
  %y = monarch.aten "aten::mul.Scalar"(%r, #monarch.scalar<5.000000e-01 : f64>) on %s : (!T) -> !T
  return %y : !T
}

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 4, gpu = 2>
  %pipe = monarch.rename %m (host -> pp) : !monarch.mesh<host = 4, gpu = 2>
  %s0 = monarch.slice %pipe (pp = 0) : !monarch.mesh<pp = 4, gpu = 2>
  %s1 = monarch.slice %pipe (pp = 1) : !monarch.mesh<pp = 4, gpu = 2>
  %s2 = monarch.slice %pipe (pp = 2) : !monarch.mesh<pp = 4, gpu = 2>
  %s3 = monarch.slice %pipe (pp = 3) : !monarch.mesh<pp = 4, gpu = 2>
  %w0a = monarch.aten "aten::arange.start"(#monarch.scalar<0 : i64>, #monarch.scalar<16 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s0 : () -> !monarch.tensor<16xf32, <gpu = 2>>
  %w0b = monarch.aten "aten::remainder.Scalar"(%w0a, #monarch.scalar<3 : i64>) on %s0 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !monarch.tensor<16xf32, <gpu = 2>>
  %w0c = monarch.aten "aten::sub.Scalar"(%w0b, #monarch.scalar<5.000000e-01 : f64>, #monarch.scalar<1 : i64>) on %s0 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !monarch.tensor<16xf32, <gpu = 2>>
  %w0 = monarch.aten "aten::reshape"(%w0c, array<i64: 4, 4>) on %s0 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !W
  %w1a = monarch.aten "aten::arange.start"(#monarch.scalar<1 : i64>, #monarch.scalar<17 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s1 : () -> !monarch.tensor<16xf32, <gpu = 2>>
  %w1b = monarch.aten "aten::remainder.Scalar"(%w1a, #monarch.scalar<3 : i64>) on %s1 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !monarch.tensor<16xf32, <gpu = 2>>
  %w1c = monarch.aten "aten::sub.Scalar"(%w1b, #monarch.scalar<5.000000e-01 : f64>, #monarch.scalar<1 : i64>) on %s1 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !monarch.tensor<16xf32, <gpu = 2>>
  %w1 = monarch.aten "aten::reshape"(%w1c, array<i64: 4, 4>) on %s1 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !W
  %w2a = monarch.aten "aten::arange.start"(#monarch.scalar<2 : i64>, #monarch.scalar<18 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s2 : () -> !monarch.tensor<16xf32, <gpu = 2>>
  %w2b = monarch.aten "aten::remainder.Scalar"(%w2a, #monarch.scalar<3 : i64>) on %s2 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !monarch.tensor<16xf32, <gpu = 2>>
  %w2c = monarch.aten "aten::sub.Scalar"(%w2b, #monarch.scalar<5.000000e-01 : f64>, #monarch.scalar<1 : i64>) on %s2 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !monarch.tensor<16xf32, <gpu = 2>>
  %w2 = monarch.aten "aten::reshape"(%w2c, array<i64: 4, 4>) on %s2 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !W
  %w3a = monarch.aten "aten::arange.start"(#monarch.scalar<3 : i64>, #monarch.scalar<19 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s3 : () -> !monarch.tensor<16xf32, <gpu = 2>>
  %w3b = monarch.aten "aten::remainder.Scalar"(%w3a, #monarch.scalar<3 : i64>) on %s3 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !monarch.tensor<16xf32, <gpu = 2>>
  %w3c = monarch.aten "aten::sub.Scalar"(%w3b, #monarch.scalar<5.000000e-01 : f64>, #monarch.scalar<1 : i64>) on %s3 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !monarch.tensor<16xf32, <gpu = 2>>
  %w3 = monarch.aten "aten::reshape"(%w3c, array<i64: 4, 4>) on %s3 : (!monarch.tensor<16xf32, <gpu = 2>>) -> !W

  // Stage 0's input.
  %g = monarch.rank %s0 (gpu) : !monarch.tensor<i64, <gpu = 2>>
  %xa = monarch.aten "aten::arange.start"(#monarch.scalar<0 : i64>, #monarch.scalar<8 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s0 : () -> !monarch.tensor<8xf32, <gpu = 2>>
  %xb = monarch.aten "aten::reshape"(%xa, array<i64: 2, 4>) on %s0 : (!monarch.tensor<8xf32, <gpu = 2>>) -> !T
  %x0 = monarch.aten "aten::add.Tensor"(%xb, %g, #monarch.scalar<1 : i64>) on %s0 : (!T, !monarch.tensor<i64, <gpu = 2>>) -> !T

  %y0 = func.call @stage(%s0, %x0, %w0) : (!M, !T, !W) -> !T
  %x1 = monarch.to_mesh %y0 to %s1 : !T -> !T
  // to_mesh copies: changing stage 0's activation afterwards does not reach stage 1.
  %z = monarch.aten "aten::mul_.Scalar"(%y0, #monarch.scalar<100 : i64>) on %s0 : (!T) -> !T
  %y1 = func.call @stage(%s1, %x1, %w1) : (!M, !T, !W) -> !T
  %x2 = monarch.to_mesh %y1 to %s2 : !T -> !T
  %y2 = func.call @stage(%s2, %x2, %w2) : (!M, !T, !W) -> !T
  %x3 = monarch.to_mesh %y2 to %s3 : !T -> !T
  %y3 = func.call @stage(%s3, %x3, %w3) : (!M, !T, !W) -> !T
  %out = monarch.reduce %y3 (gpu) sum : !T -> !T

  // CHECK:      fetch #{{[0-9]+}} rank 2 (host=1, gpu=0): tensor<2x4xf32> {{\[\[}}0, 0, 1.5, 0], [2, 4, 7.5, 2]]
  // CHECK-NEXT: fetch #{{[0-9]+}} rank 3 (host=1, gpu=1): tensor<2x4xf32> {{\[\[}}0.5, 1, 3, 0.5], [2.5, 5, 9, 2.5]]
  // CHECK-NEXT: fetch #{{[0-9]+}} rank 1 (host=0, gpu=1): tensor<2x4xf32> {{\[\[}}50, 100, 300, 50], [250, 500, 900, 250]]
  // CHECK-NEXT: fetch #{{[0-9]+}} rank 6 (host=3, gpu=0): tensor<2x4xf32> {{\[\[}}0, 0, 0, 0], [0, 1.39062, 0.171875, 0]]
  // CHECK-NEXT: fetch #{{[0-9]+}} rank 7 (host=3, gpu=1): tensor<2x4xf32> {{\[\[}}0, 0, 0, 0], [0, 2.28125, 1.65625, 0]]
  // CHECK-NEXT: fetch #{{[0-9]+}} rank 6 (host=3, gpu=0): tensor<2x4xf32> {{\[\[}}0, 0, 0, 0], [0, 3.67188, 1.82812, 0]]
  // CHECK-NEXT: fetch #{{[0-9]+}} rank 7 (host=3, gpu=1): tensor<2x4xf32> {{\[\[}}0, 0, 0, 0], [0, 3.67188, 1.82812, 0]]
  // CHECK-NOT:  fetch
  %f0 = monarch.fetch_shard %x1 at (gpu = 0) : !T -> !H
  %f1 = monarch.fetch_shard %x1 at (gpu = 1) : !T -> !H
  %f2 = monarch.fetch_shard %y0 at (gpu = 1) : !T -> !H
  %f3 = monarch.fetch_shard %y3 at (gpu = 0) : !T -> !H
  %f4 = monarch.fetch_shard %y3 at (gpu = 1) : !T -> !H
  %f5 = monarch.fetch_shard %out at (gpu = 0) : !T -> !H
  %f6 = monarch.fetch_shard %out at (gpu = 1) : !T -> !H
  return
}
