// RUN: monarch-run %s --memory-cap 1572864 > %t.out
// RUN: FileCheck %s < %t.out
// The cap is enforced: 200 KB does not even hold one 256 KB tensor.
// RUN: %expect-exit 1 monarch-run %s --memory-cap 204800 > %t.small 2> %t.small.err
// RUN: FileCheck %s --check-prefix=SMALL < %t.small

// A loop (scf.for) of 1,000 iterations on gpu=2: one recording called 1,000
// times. Every iteration makes two new 256 KB tensors (65,536 f32), so a
// runtime or lowering that leaked one tensor per iteration would need about
// 256 MB per worker; the run is capped at 1.5 MB per worker (--memory-cap),
// which holds the four live tensors at the peak (w, the carried x and the body's
// two temporaries: 1 MB) and not a fifth and sixth, so a leak fails within
// three iterations. (Measured: the same run fails with a 1 MB cap, passes at
// 1.25 MB.)

// x starts at 0 and gains 1 per iteration: 1000 everywhere, sum 65,536,000.
// CHECK:      fetch #{{[0-9]+}} rank 0 (gpu=0): tensor<4xf32> [1000, 1000, 1000, 1000]
// CHECK-NEXT: fetch #{{[0-9]+}} rank 1 (gpu=1): tensor<f32> 6.5536e+07
// CHECK-NOT:  fetch

// SMALL: fetch #{{[0-9]+}} rank 0 (gpu=0): error: instruction #{{[0-9]+}} (at {{.*}}loop.mlir:{{[0-9]+}}{{.*}}) failed on rank 0: memory cap exceeded

!T = !monarch.tensor<65536xf32, <gpu = 2>>

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1000 = arith.constant 1000 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %w = monarch.aten "aten::ones"(array<i64: 65536>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %x0 = monarch.aten "aten::zeros"(array<i64: 65536>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %x = scf.for %i = %c0 to %c1000 step %c1 iter_args(%acc = %x0) -> (!T) {
    // acc + 2*w - 1 = acc + 1, through two fresh tensors.
    %t = monarch.aten "aten::add.Tensor"(%acc, %w, #monarch.scalar<2 : i64>) on %m : (!T, !T) -> !T
    %n = monarch.aten "aten::sub.Scalar"(%t, #monarch.scalar<1 : i64>, #monarch.scalar<1 : i64>) on %m : (!T) -> !T
    scf.yield %n : !T
  }
  %tail = monarch.aten "aten::narrow"(%x, 0 : i64, 65532 : i64, 4 : i64) on %m : (!T) -> !monarch.tensor<4xf32, <gpu = 2>>
  %sum = monarch.aten "aten::sum"(%x, #monarch.none) on %m : (!T) -> !monarch.tensor<f32, <gpu = 2>>
  %f0 = monarch.fetch_shard %tail : !monarch.tensor<4xf32, <gpu = 2>> -> !monarch.host<tensor<4xf32>>
  %f1 = monarch.fetch_shard %sum at (gpu = 1) : !monarch.tensor<f32, <gpu = 2>> -> !monarch.host<tensor<f32>>
  return
}
