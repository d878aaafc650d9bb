// RUN: monarch-run %s > %t.out
// RUN: FileCheck %s < %t.out
// RUN: monarch-run %s --no-optimize | FileCheck %s

// A DDP training loop whose step number is data: each iteration k (of 6,
// from 1) makes its batch from k (make_batch(step): x = k * (rank + 1)) and
// its learning rate from k (a schedule: lr = 1 / (4k)); the gradient is
// all-reduced and w updated in place. The loop is ONE plan instruction, its
// induction variable a tensor the runtime sets each iteration
// (monarch.index_tensor). Run through the default pipeline (the all-reduce on
// the comm stream inside the loop's recording, borrows and all) and without.
//
// With loss = sum(w * d), grad = d; averaged over the 2 ranks: 1.5 k; the
// update is lr * 1.5 k = 0.375, whatever k: w = 1 - 6 * 0.375 = -1.25. The
// last loss (k = 6, rank 1, before its update): 4 * -0.875 * 12 = -42.
// A nested loop reads the outer loop's step too: acc += i * j over i < 3,
// j < 4: 3 * 6 = 18.

// CHECK:      fetch #{{[0-9]+}} rank 1 (gpu=1): tensor<f32> -42
// CHECK-NEXT: fetch #{{[0-9]+}} rank 0 (gpu=0): tensor<4xf32> [-1.25, -1.25, -1.25, -1.25]
// CHECK-NEXT: fetch #{{[0-9]+}} rank 1 (gpu=1): tensor<i64> 18
// CHECK-NOT:  fetch

!T = !monarch.tensor<4xf32, <gpu = 2>>
!F = !monarch.tensor<f32, <gpu = 2>>
!I = !monarch.tensor<i64, <gpu = 2>>

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %w = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %ones = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %r = monarch.rank %m (gpu) : !I
  %r1 = monarch.aten "aten::add.Scalar"(%r, #monarch.scalar<1 : i64>, #monarch.scalar<1 : i64>) on %m : (!I) -> !I
  %zero = monarch.aten "aten::zeros"(array<i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !F
  %last = scf.for %k = %c1 to %c7 step %c1 iter_args(%prev = %zero) -> (!F) {
    %step = monarch.index_tensor %k on %m : !I
    // make_batch(step)
    %sx = monarch.aten "aten::mul.Tensor"(%step, %r1) on %m : (!I, !I) -> !I
    %d = monarch.aten "aten::mul.Tensor"(%ones, %sx) on %m : (!T, !I) -> !T
    %wd = monarch.aten "aten::mul.Tensor"(%w, %d) on %m : (!T, !T) -> !T
    %loss = monarch.aten "aten::sum"(%wd, #monarch.none) on %m : (!T) -> !F
    %g = monarch.aten "aten::clone"(%d, #monarch.none) on %m : (!T) -> !T
    %gr = monarch.reduce %g (gpu) avg inplace : !T -> !T
    // lr = 1 / (4 * step)
    %four = monarch.aten "aten::mul.Scalar"(%step, #monarch.scalar<4 : i64>) on %m : (!I) -> !I
    %lr = monarch.aten "aten::reciprocal"(%four) on %m : (!I) -> !F
    %u = monarch.aten "aten::mul.Tensor"(%gr, %lr) on %m : (!T, !F) -> !T
    %w2 = monarch.aten "aten::sub_.Tensor"(%w, %u, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
    scf.yield %loss : !F
  }
  %f0 = monarch.fetch_shard %last at (gpu = 1) : !F -> !monarch.host<tensor<f32>>
  %f1 = monarch.fetch_shard %w : !T -> !monarch.host<tensor<4xf32>>
  %acc0 = monarch.aten "aten::zeros"(array<i64>, #monarch.dtype<int64>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !I
  %acc = scf.for %i = %c0 to %c3 step %c1 iter_args(%a = %acc0) -> (!I) {
    %in = scf.for %j = %c0 to %c4 step %c1 iter_args(%b = %a) -> (!I) {
      %si = monarch.index_tensor %i on %m : !I
      %sj = monarch.index_tensor %j on %m : !I
      %p = monarch.aten "aten::mul.Tensor"(%si, %sj) on %m : (!I, !I) -> !I
      %n = monarch.aten "aten::add.Tensor"(%b, %p, #monarch.scalar<1 : i64>) on %m : (!I, !I) -> !I
      scf.yield %n : !I
    }
    scf.yield %in : !I
  }
  %f2 = monarch.fetch_shard %acc at (gpu = 1) : !I -> !monarch.host<tensor<i64>>
  return
}
