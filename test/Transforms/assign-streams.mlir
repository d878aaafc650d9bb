// RUN: monarch-opt %s --split-input-file --monarch-assign-streams --monarch-verify-borrows | FileCheck %s
// RUN: monarch-opt %s --split-input-file --monarch-assign-streams=stream=nccl | FileCheck %s --check-prefix=NAMED

!T = !monarch.tensor<4xf32, <dp = 8>>
!C = !monarch.tensor<4xf32, <dp = 8>, stream = "comm">

// The in-place collective moves to the comm stream on a mutable borrow; the
// drop lands just before the next use of the gradient, not at the wait.
// CHECK-LABEL: func.func @borrow_around_collective
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<dp = 8>, %[[G:[^:]*]]: {{.*}}, %[[P:[^:]*]]: {{.*}}, %[[Y:[^:]*]]: {{.*}})
// NAMED-LABEL: func.func @borrow_around_collective
// NAMED: monarch.stream_create : !monarch.stream<"nccl">
// NAMED: monarch.reduce_start %{{.*}} : !monarch.tensor<4xf32, <dp = 8>, stream = "nccl">
func.func @borrow_around_collective(%m: !monarch.mesh<dp = 8>, %g: !T, %p: !T, %y: !T) -> !T {
  // CHECK-NEXT: %[[S:.*]] = monarch.stream_create : !monarch.stream<"comm">
  // CHECK-NEXT: %[[GC:.*]], %[[B:.*]] = monarch.borrow %[[G]] to %[[S]] mutable : !monarch.tensor<4xf32, <dp = 8>> -> !monarch.tensor<4xf32, <dp = 8>, stream = "comm">
  // CHECK-NEXT: monarch.borrow_first_use %[[B]]
  // CHECK-NEXT: %[[T:.*]] = monarch.reduce_start %[[GC]] (dp) sum inplace : !monarch.tensor<4xf32, <dp = 8>, stream = "comm"> -> !monarch.async<!monarch.tensor<4xf32, <dp = 8>, stream = "comm">>
  // CHECK-NEXT: monarch.wait %[[T]] : !monarch.async<!monarch.tensor<4xf32, <dp = 8>, stream = "comm">>
  // CHECK-NEXT: monarch.borrow_last_use %[[B]]
  // CHECK-NEXT: monarch.aten "aten::neg"(%[[Y]])
  // CHECK-NEXT: monarch.borrow_drop %[[B]]
  // CHECK-NEXT: %[[U:.*]] = monarch.aten "aten::sub_.Tensor"(%[[P]], %[[G]], #monarch.scalar<1.000000e-02 : f64>)
  // CHECK-NEXT: return %[[U]]
  %t = monarch.reduce_start %g (dp) sum inplace : !T -> !monarch.async<!T>
  %r = monarch.wait %t : !monarch.async<!T>
  %n = monarch.aten "aten::neg"(%y) on %m : (!T) -> !T
  %u = monarch.aten "aten::sub_.Tensor"(%p, %r, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  return %u : !T
}

// -----

!T = !monarch.tensor<4xf32, <dp = 8>>

// Never used again: the drop goes before the terminator. One stream handle
// serves every collective of the function. On the comm stream each wait
// follows its own start, so the first borrow's last use is not held behind
// the second collective (the stream runs its ops in order).
// CHECK-LABEL: func.func @two_collectives
func.func @two_collectives(%g: !T, %h: !T) {
  // CHECK-COUNT-1: monarch.stream_create
  // CHECK-NOT: monarch.stream_create
  // CHECK: %{{[^ ]*}}, %[[B1:[^ ]*]] = monarch.borrow %{{.*}} mutable
  // CHECK-NEXT: monarch.borrow_first_use %[[B1]]
  // CHECK-NEXT: %[[T1:.*]] = monarch.reduce_start
  // CHECK-NEXT: monarch.wait %[[T1]]
  // CHECK-NEXT: monarch.borrow_last_use %[[B1]]
  // CHECK-NEXT: %{{[^ ]*}}, %[[B2:[^ ]*]] = monarch.borrow %{{.*}} mutable
  // CHECK-NEXT: monarch.borrow_first_use %[[B2]]
  // CHECK-NEXT: %[[T2:.*]] = monarch.reduce_start
  // CHECK-NEXT: monarch.wait %[[T2]]
  // CHECK-NEXT: monarch.borrow_last_use %[[B2]]
  // CHECK-NEXT: monarch.borrow_drop %[[B1]]
  // CHECK-NEXT: monarch.borrow_drop %[[B2]]
  // CHECK-NEXT: return
  %t1 = monarch.reduce_start %g (dp) sum inplace : !T -> !monarch.async<!T>
  %t2 = monarch.reduce_start %h (dp) sum inplace : !T -> !monarch.async<!T>
  %r1 = monarch.wait %t1 : !monarch.async<!T>
  %r2 = monarch.wait %t2 : !monarch.async<!T>
  return
}

// -----

!T = !monarch.tensor<4xf32, <dp = 8>>

// Left on the default stream: an out-of-place collective (its result would
// need a borrow back), and an in-place one whose tensor is read before the
// wait (a mutable borrow would make that read BORROWED).
// CHECK-LABEL: func.func @left_alone
func.func @left_alone(%m: !monarch.mesh<dp = 8>, %g: !T, %h: !T) -> (!T, !T) {
  // CHECK-NOT: monarch.borrow
  // CHECK-NOT: stream = "comm"
  // CHECK: return
  %t1 = monarch.reduce_start %g (dp) sum : !T -> !monarch.async<!T>
  %r1 = monarch.wait %t1 : !monarch.async<!T>
  %t2 = monarch.reduce_start %h (dp) sum inplace : !T -> !monarch.async<!T>
  %n = monarch.aten "aten::neg"(%h) on %m : (!T) -> !T
  %r2 = monarch.wait %t2 : !monarch.async<!T>
  return %r1, %n : !T, !T
}

// -----

!T = !monarch.tensor<4xf32, <dp = 8>>
!C = !monarch.tensor<4xf32, <dp = 8>, stream = "comms">

// A collective the program already runs on its own stream (hand-written
// overlap) is left there: no second borrow onto "comm".
// CHECK-LABEL: func.func @already_on_a_stream
func.func @already_on_a_stream(%m: !monarch.mesh<dp = 8>, %g: !T) -> !T {
  // CHECK: %[[S:.*]] = monarch.stream_create : !monarch.stream<"comms">
  // CHECK-NEXT: %[[B:.*]], %[[TOK:.*]] = monarch.borrow %{{.*}} to %[[S]] mutable
  // CHECK-NOT: = monarch.borrow
  // CHECK-NOT: "comm">
  // CHECK: return
  %s = monarch.stream_create : !monarch.stream<"comms">
  %b, %tok = monarch.borrow %g to %s mutable : !T -> !C
  monarch.borrow_first_use %tok
  %t = monarch.reduce_start %b (dp) sum inplace : !C -> !monarch.async<!C>
  %r = monarch.wait %t : !monarch.async<!C>
  monarch.borrow_last_use %tok
  monarch.borrow_drop %tok
  return %g : !T
}
