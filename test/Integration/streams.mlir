// RUN: monarch-run %s > %t.out
// RUN: FileCheck %s < %t.out
// RUN: monarch-run %s --no-optimize | FileCheck %s

// Streams and borrows (DESIGN.md §6.4) on gpu=2: a read-only borrow onto a
// "comm" stream that reduces while the default stream keeps reading, a mutable
// borrow whose write the origin sees after the drop, a tensor made on the comm
// stream, and a borrow inside a loop (fresh borrow ids per call).
// x = arange(4) + 10*gpu: gpu 0 [0, 1, 2, 3], gpu 1 [10, 11, 12, 13].

!T = !monarch.tensor<4xf32, <gpu = 2>>
!C = !monarch.tensor<4xf32, <gpu = 2>, stream = "comm">
!H = !monarch.host<tensor<4xf32>>

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %comm = monarch.stream_create : !monarch.stream<"comm">
  %g = monarch.rank %m (gpu) : !monarch.tensor<i64, <gpu = 2>>
  %a = monarch.aten "aten::arange.start"(#monarch.scalar<0 : i64>, #monarch.scalar<4 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %x = monarch.aten "aten::add.Tensor"(%a, %g, #monarch.scalar<10 : i64>) on %m : (!T, !monarch.tensor<i64, <gpu = 2>>) -> !T

  // Read-only borrow: comm reduces x over gpu while default reads x too.
  %xc, %b = monarch.borrow %x to %comm : !T -> !C
  monarch.borrow_first_use %b
  %s = monarch.reduce %xc (gpu) sum : !C -> !C
  %y = monarch.aten "aten::mul.Scalar"(%x, #monarch.scalar<2 : i64>) on %m : (!T) -> !T
  monarch.borrow_last_use %b
  monarch.borrow_drop %b
  // After the drop the origin may write again.
  monarch.aten "aten::add_.Scalar"(%x, #monarch.scalar<100 : i64>, #monarch.scalar<1 : i64>) on %m : (!T) -> ()

  // CHECK:      rank 0 (gpu=0): tensor<4xf32> [10, 12, 14, 16]
  // CHECK-NEXT: rank 1 (gpu=1): tensor<4xf32> [20, 22, 24, 26]
  // CHECK-NEXT: rank 0 (gpu=0): tensor<4xf32> [100, 101, 102, 103]
  %f0 = monarch.fetch_shard %s : !C -> !H
  %f1 = monarch.fetch_shard %y at (gpu = 1) : !T -> !H
  %f2 = monarch.fetch_shard %x : !T -> !H

  // Mutable borrow: comm doubles x in place; default sees it after the drop.
  // CHECK-NEXT: rank 1 (gpu=1): tensor<4xf32> [220, 222, 224, 226]
  %xm, %bm = monarch.borrow %x to %comm mutable : !T -> !C
  monarch.aten "aten::mul_.Scalar"(%xm, #monarch.scalar<2 : i64>) on %m : (!C) -> ()
  monarch.borrow_drop %bm
  %f3 = monarch.fetch_shard %x at (gpu = 1) : !T -> !H

  // A tensor created on the comm stream, reduced there.
  // CHECK-NEXT: rank 1 (gpu=1): tensor<4xf32> [6, 6, 6, 6]
  %o = monarch.aten "aten::full"(array<i64: 4>, #monarch.scalar<3 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !C
  %os = monarch.reduce %o (gpu) sum : !C -> !C
  %f4 = monarch.fetch_shard %os at (gpu = 1) : !C -> !H

  // A mutable borrow per iteration, 3 iterations: x *= 8.
  // CHECK-NEXT: rank 0 (gpu=0): tensor<4xf32> [1600, 1616, 1632, 1648]
  scf.for %i = %c0 to %c3 step %c1 {
    %xl, %bl = monarch.borrow %x to %comm mutable : !T -> !C
    monarch.aten "aten::mul_.Scalar"(%xl, #monarch.scalar<2 : i64>) on %m : (!C) -> ()
    monarch.borrow_drop %bl
  }
  %f5 = monarch.fetch_shard %x : !T -> !H
  return
}
// CHECK-NOT: fetch
