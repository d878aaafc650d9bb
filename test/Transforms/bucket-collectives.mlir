// RUN: monarch-opt %s --split-input-file --monarch-bucket-collectives | FileCheck %s
// RUN: monarch-opt %s --split-input-file --monarch-bucket-collectives=max-bytes=16 | FileCheck %s --check-prefix=SMALL

!A = !monarch.tensor<4xf32, <dp = 8>>
!B = !monarch.tensor<2x3xf32, <dp = 8>>

// Two small all-reduces become one on a flat buffer, built where the second
// started and split and copied back where the first was waited for.
// CHECK-LABEL: func.func @merge
// CHECK-SAME: (%[[M:[^:]*]]: !monarch.mesh<dp = 8>, %[[X:[^:]*]]: {{[^%]*}}, %[[Y:[^:]*]]: {{[^%]*}})
// SMALL-LABEL: func.func @merge
// SMALL-COUNT-2: monarch.reduce_start
// SMALL-NOT: aten::cat
func.func @merge(%m: !monarch.mesh<dp = 8>, %x: !A, %y: !B) -> (!A, !B) {
  // CHECK: %[[G1:.*]] = monarch.aten "aten::neg"(%[[X]])
  // CHECK-NEXT: %[[G2:.*]] = monarch.aten "aten::neg"(%[[Y]])
  // CHECK-NEXT: %[[F1:.*]] = monarch.aten "aten::reshape"(%[[G1]], array<i64: -1>) on %[[M]] : ({{.*}}) -> !monarch.tensor<4xf32, <dp = 8>>
  // CHECK-NEXT: %[[F2:.*]] = monarch.aten "aten::reshape"(%[[G2]], array<i64: -1>) on %[[M]] : ({{.*}}) -> !monarch.tensor<6xf32, <dp = 8>>
  // CHECK-NEXT: %[[FLAT:.*]] = monarch.aten "aten::cat"([%[[F1]], %[[F2]]], 0 : i64) on %[[M]] : ({{.*}}) -> !monarch.tensor<10xf32, <dp = 8>>
  // CHECK-NEXT: %[[T:.*]] = monarch.reduce_start %[[FLAT]] (dp) sum inplace : !monarch.tensor<10xf32, <dp = 8>>
  // CHECK-NEXT: %[[W:.*]] = monarch.wait %[[T]]
  // CHECK-NEXT: %[[P:.*]]:2 = monarch.aten "aten::split_with_sizes"(%[[W]], array<i64: 4, 6>, 0 : i64)
  // CHECK-NEXT: %[[V1:.*]] = monarch.aten "aten::view"(%[[P]]#0, array<i64: 4>)
  // CHECK-NEXT: %[[C1:.*]] = monarch.aten "aten::copy_"(%[[G1]], %[[V1]], false)
  // CHECK-NEXT: %[[V2:.*]] = monarch.aten "aten::view"(%[[P]]#1, array<i64: 2, 3>)
  // CHECK-NEXT: %[[C2:.*]] = monarch.aten "aten::copy_"(%[[G2]], %[[V2]], false)
  // CHECK-NEXT: return %[[C1]], %[[C2]]
  %g1 = monarch.aten "aten::neg"(%x) on %m : (!A) -> !A
  %t1 = monarch.reduce_start %g1 (dp) sum inplace : !A -> !monarch.async<!A>
  %g2 = monarch.aten "aten::neg"(%y) on %m : (!B) -> !B
  %t2 = monarch.reduce_start %g2 (dp) sum inplace : !B -> !monarch.async<!B>
  %r1 = monarch.wait %t1 : !monarch.async<!A>
  %r2 = monarch.wait %t2 : !monarch.async<!B>
  return %r1, %r2 : !A, !B
}

// -----

!A = !monarch.tensor<4xf32, <dp = 8>>

// Not merged: the first tensor is read before the second start; different
// reductions; an out-of-place reduce.
// CHECK-LABEL: func.func @no_merge
// CHECK-NOT: aten::cat
// CHECK-COUNT-4: monarch.reduce_start
// CHECK-NOT: aten::cat
func.func @no_merge(%m: !monarch.mesh<dp = 8>, %x: !A) -> (!A, !A, !A, !A, !A) {
  %g1 = monarch.aten "aten::neg"(%x) on %m : (!A) -> !A
  %t1 = monarch.reduce_start %g1 (dp) sum inplace : !A -> !monarch.async<!A>
  %n = monarch.aten "aten::relu"(%g1) on %m : (!A) -> !A
  %g2 = monarch.aten "aten::neg"(%x) on %m : (!A) -> !A
  %t2 = monarch.reduce_start %g2 (dp) sum inplace : !A -> !monarch.async<!A>
  %g3 = monarch.aten "aten::neg"(%x) on %m : (!A) -> !A
  %t3 = monarch.reduce_start %g3 (dp) max inplace : !A -> !monarch.async<!A>
  %g4 = monarch.aten "aten::neg"(%x) on %m : (!A) -> !A
  %t4 = monarch.reduce_start %g4 (dp) max : !A -> !monarch.async<!A>
  %r1 = monarch.wait %t1 : !monarch.async<!A>
  %r2 = monarch.wait %t2 : !monarch.async<!A>
  %r3 = monarch.wait %t3 : !monarch.async<!A>
  %r4 = monarch.wait %t4 : !monarch.async<!A>
  return %r1, %r2, %r3, %r4, %n : !A, !A, !A, !A, !A
}
