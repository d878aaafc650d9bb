// RUN: monarch-opt %s --split-input-file --monarch-assign-streams --monarch-verify-borrows | FileCheck %s
// RUN: monarch-opt %s --split-input-file --monarch-assign-streams=stream=nccl | FileCheck %s --check-prefix=NAMED
// RUN: monarch-opt %s --split-input-file --monarch-assign-streams="to-mesh=false out-of-place=false" --monarch-verify-borrows | FileCheck %s --check-prefix=OFF

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

// Left on the default stream: an in-place collective whose tensor is read
// before the wait (a mutable borrow would make that read BORROWED), and an
// out-of-place one whose result is returned (it would leave the block while
// lent back from the comm stream).
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

// -----

!A = !monarch.tensor<4xf32, <x = 2>>

// A transfer runs on the comm stream on a read-only borrow of its source,
// which the sender keeps reading meanwhile; the sender drops the borrow only
// before it writes the source. The received tensor is lent back to the
// default stream: its first use waits for the copy, and the comm stream
// takes it back at the end of the block.
// CHECK-LABEL: func.func @to_mesh_on_comm
// CHECK-SAME: (%[[S0:[^:]*]]: !monarch.mesh<x = 2>, %[[S1:[^:]*]]: !monarch.mesh<x = 2>, %[[A:[^:]*]]: {{.*}}, %[[W:[^:]*]]: {{.*}})
// OFF-LABEL: func.func @to_mesh_on_comm
// OFF-NOT: monarch.borrow
// OFF: return
func.func @to_mesh_on_comm(%s0: !monarch.mesh<x = 2>, %s1: !monarch.mesh<x = 2>, %a: !A, %w: !A) {
  // CHECK-NEXT: %[[MAIN:.*]] = monarch.stream_create : !monarch.stream<"">
  // CHECK-NEXT: %[[COMM:.*]] = monarch.stream_create : !monarch.stream<"comm">
  // CHECK-NEXT: %[[A2:.*]], %[[BA:.*]] = monarch.borrow %[[A]] to %[[COMM]] : !monarch.tensor<4xf32, <x = 2>> -> !monarch.tensor<4xf32, <x = 2>, stream = "comm">
  // CHECK-NEXT: monarch.borrow_first_use %[[BA]]
  // CHECK-NEXT: %[[C:.*]] = monarch.to_mesh_start %[[A2]] to %[[S1]] : !monarch.tensor<4xf32, <x = 2>, stream = "comm"> -> !monarch.async<!monarch.tensor<4xf32, <x = 2>, stream = "comm">>
  // CHECK-NEXT: %[[D:.*]] = monarch.wait %[[C]]
  // CHECK-NEXT: monarch.borrow_last_use %[[BA]]
  // CHECK-NEXT: %[[D2:.*]], %[[BD:.*]] = monarch.borrow %[[D]] to %[[MAIN]] mutable : !monarch.tensor<4xf32, <x = 2>, stream = "comm"> -> !monarch.tensor<4xf32, <x = 2>>
  // CHECK-NEXT: monarch.aten "aten::neg"(%[[A]])
  // CHECK-NEXT: monarch.aten "aten::neg"(%[[W]])
  // CHECK-NEXT: monarch.borrow_first_use %[[BD]]
  // CHECK-NEXT: monarch.aten "aten::relu"(%[[D2]])
  // CHECK-NEXT: monarch.aten "aten::add_.Tensor"(%[[D2]], %[[D2]])
  // CHECK-NEXT: monarch.borrow_last_use %[[BD]]
  // CHECK-NEXT: monarch.borrow_drop %[[BA]]
  // CHECK-NEXT: monarch.aten "aten::mul_.Tensor"(%[[A]], %[[A]])
  // CHECK-NEXT: monarch.borrow_drop %[[BD]]
  // CHECK-NEXT: return
  %c = monarch.to_mesh_start %a to %s1 : !A -> !monarch.async<!A>
  %n = monarch.aten "aten::neg"(%a) on %s0 : (!A) -> !A
  %v = monarch.aten "aten::neg"(%w) on %s0 : (!A) -> !A
  %d = monarch.wait %c : !monarch.async<!A>
  %e = monarch.aten "aten::relu"(%d) on %s1 : (!A) -> !A
  %f = monarch.aten "aten::add_.Tensor"(%d, %d) on %s1 : (!A, !A) -> !A
  %g = monarch.aten "aten::mul_.Tensor"(%a, %a) on %s0 : (!A, !A) -> !A
  return
}

// -----

!A = !monarch.tensor<4xf32, <x = 2>>

// Transfers keep their program order on the comm stream (one communicator),
// each waited for right after its start. No borrow outlives the next
// start: the sender takes its input back, and the comm stream the received
// tensor, before the next transfer (else an unrolled program would keep
// every transferred tensor alive to its end).
// CHECK-LABEL: func.func @transfers_keep_order
// CHECK-SAME: (%[[S0:[^:]*]]: {{.*}}, %[[S1:[^:]*]]: {{.*}}, %[[A:[^:]*]]: {{.*}}, %[[B:[^:]*]]: {{.*}})
// OFF-LABEL: func.func @transfers_keep_order
// OFF-NOT: monarch.borrow
// OFF: return
func.func @transfers_keep_order(%s0: !monarch.mesh<x = 2>, %s1: !monarch.mesh<x = 2>, %a: !A, %b: !A) {
  // CHECK: %[[A2:[^,]*]], %[[BA:.*]] = monarch.borrow %[[A]]
  // CHECK-NEXT: monarch.borrow_first_use %[[BA]]
  // CHECK-NEXT: %[[C1:.*]] = monarch.to_mesh_start %[[A2]] to %[[S1]] : {{.*}} stream = "comm">
  // CHECK-NEXT: %[[W1:.*]] = monarch.wait %[[C1]]
  // CHECK-NEXT: monarch.borrow_last_use %[[BA]]
  // CHECK-NEXT: %[[D1:[^,]*]], %[[B1:.*]] = monarch.borrow %[[W1]] to %{{.*}} mutable
  // CHECK-NEXT: monarch.borrow_first_use %[[B1]]
  // CHECK-NEXT: monarch.aten "aten::relu"(%[[D1]])
  // CHECK-NEXT: monarch.borrow_last_use %[[B1]]
  // CHECK-NEXT: monarch.borrow_drop %[[B1]]
  // CHECK-NEXT: monarch.borrow_drop %[[BA]]
  // CHECK-NEXT: %[[B2:[^,]*]], %[[BB:.*]] = monarch.borrow %[[B]]
  // CHECK-NEXT: monarch.borrow_first_use %[[BB]]
  // CHECK-NEXT: %[[C2:.*]] = monarch.to_mesh_start %[[B2]] to %[[S0]] : {{.*}} stream = "comm">
  // CHECK-NEXT: %[[W2:.*]] = monarch.wait %[[C2]]
  // CHECK-NEXT: monarch.borrow_last_use %[[BB]]
  // CHECK-NEXT: %[[D2:[^,]*]], %[[BD2:.*]] = monarch.borrow %[[W2]] to %{{.*}} mutable
  // CHECK-NEXT: monarch.borrow_first_use %[[BD2]]
  // CHECK-NEXT: monarch.aten "aten::relu"(%[[D2]])
  // CHECK-NEXT: monarch.borrow_last_use %[[BD2]]
  // CHECK-NEXT: monarch.borrow_drop %[[BD2]]
  // CHECK-NEXT: monarch.borrow_drop %[[BB]]
  // CHECK-NEXT: return
  %c1 = monarch.to_mesh_start %a to %s1 : !A -> !monarch.async<!A>
  %d1 = monarch.wait %c1 : !monarch.async<!A>
  %e1 = monarch.aten "aten::relu"(%d1) on %s1 : (!A) -> !A
  %c2 = monarch.to_mesh_start %b to %s0 : !A -> !monarch.async<!A>
  %d2 = monarch.wait %c2 : !monarch.async<!A>
  %e2 = monarch.aten "aten::relu"(%d2) on %s0 : (!A) -> !A
  return
}

// -----

!T = !monarch.tensor<4xf32, <dp = 8>>
!S = !monarch.tensor<8x4xf32, <dp = 8>>

// An out-of-place collective is a copy too: read-only borrow of its input,
// its result lent back. With out-of-place=false it stays.
// CHECK-LABEL: func.func @out_of_place
// CHECK-SAME: (%[[M:[^:]*]]: {{.*}}, %[[G:[^:]*]]: {{.*}})
// OFF-LABEL: func.func @out_of_place
// OFF-NOT: monarch.borrow %{{.*}} to %{{.*}} mutable
// OFF: return
func.func @out_of_place(%m: !monarch.mesh<dp = 8>, %g: !T) {
  // CHECK: %[[G2:.*]], %[[BG:.*]] = monarch.borrow %[[G]] to %{{.*}} : !monarch.tensor<4xf32, <dp = 8>> -> !monarch.tensor<4xf32, <dp = 8>, stream = "comm">
  // CHECK-NEXT: monarch.borrow_first_use %[[BG]]
  // CHECK-NEXT: %[[T:.*]] = monarch.reduce_start %[[G2]] (dp) stack : !monarch.tensor<4xf32, <dp = 8>, stream = "comm"> -> !monarch.async<!monarch.tensor<8x4xf32, <dp = 8>, stream = "comm">>
  // CHECK-NEXT: %[[R:.*]] = monarch.wait %[[T]]
  // CHECK-NEXT: monarch.borrow_last_use %[[BG]]
  // CHECK-NEXT: %[[R2:.*]], %[[BR:.*]] = monarch.borrow %[[R]] to %{{.*}} mutable
  // CHECK-NEXT: monarch.borrow_first_use %[[BR]]
  // CHECK-NEXT: monarch.aten "aten::relu"(%[[R2]])
  // CHECK-NEXT: monarch.borrow_last_use %[[BR]]
  // CHECK-NEXT: monarch.borrow_drop %[[BR]]
  // CHECK-NEXT: monarch.borrow_drop %[[BG]]
  // CHECK-NEXT: return
  %t = monarch.reduce_start %g (dp) stack : !T -> !monarch.async<!S>
  %r = monarch.wait %t : !monarch.async<!S>
  %e = monarch.aten "aten::relu"(%r) on %m : (!S) -> !S
  return
}

// -----

!A = !monarch.tensor<4xf32, <x = 2>>
!O = !monarch.tensor<4xf32, <x = 2>, stream = "side">

// A transfer of a tensor lent to the default stream by the program's own
// borrow stays where it is (no nested borrows), and so does a transfer
// whose result is yielded out of a loop.
// CHECK-LABEL: func.func @copies_left_alone
func.func @copies_left_alone(%s1: !monarch.mesh<x = 2>, %a: !A, %o: !O, %n: index) -> (!A, !A) {
  // CHECK-COUNT-1: = monarch.borrow %
  // CHECK-NOT: = monarch.borrow %
  // CHECK-NOT: "comm"
  // CHECK: return
  %main = monarch.stream_create : !monarch.stream<"">
  %l, %b = monarch.borrow %o to %main : !O -> !A
  monarch.borrow_first_use %b
  %lc = monarch.to_mesh_start %l to %s1 : !A -> !monarch.async<!A>
  %ld = monarch.wait %lc : !monarch.async<!A>
  %le = monarch.aten "aten::neg"(%ld) on %s1 : (!A) -> !A
  monarch.borrow_last_use %b
  monarch.borrow_drop %b
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %a) -> (!A) {
    %c = monarch.to_mesh_start %acc to %s1 : !A -> !monarch.async<!A>
    %d = monarch.wait %c : !monarch.async<!A>
    scf.yield %d : !A
  }
  return %r, %le : !A, !A
}

// -----

!A = !monarch.tensor<4xf32, <x = 2>>

// Views of the received tensor are its memory: the lent borrow lasts until
// their last use (the pipeline's `act.detach()` read by a later backward),
// not only the tensor's own. Were it dropped earlier, the comm stream could
// hand that memory to the next transfer while the default stream's kernels
// still read the view (wrong losses on a GPU, none on the CPU, where the
// view keeps its storage alive).
// CHECK-LABEL: func.func @views_of_the_received_tensor
func.func @views_of_the_received_tensor(%s1: !monarch.mesh<x = 2>, %a: !A, %b: !A) {
  // CHECK:      %[[D:.*]] = monarch.wait
  // CHECK:      %[[D2:.*]], %[[BD:.*]] = monarch.borrow %[[D]] to %{{.*}} mutable
  // CHECK:      monarch.borrow_first_use %[[BD]]
  // CHECK-NEXT: %[[V:.*]] = monarch.aten "aten::detach"(%[[D2]])
  // CHECK-NEXT: %[[W:.*]] = monarch.aten "aten::detach"(%[[V]])
  // CHECK-NEXT: monarch.aten "aten::neg"(%{{[^)]*}})
  // CHECK-NEXT: monarch.aten "aten::relu"(%[[W]])
  // CHECK-NEXT: monarch.borrow_last_use %[[BD]]
  %c = monarch.to_mesh_start %a to %s1 : !A -> !monarch.async<!A>
  %d = monarch.wait %c : !monarch.async<!A>
  %v = monarch.aten "aten::detach"(%d) on %s1 : (!A) -> !A
  %w = monarch.aten "aten::detach"(%v) on %s1 : (!A) -> !A
  %n = monarch.aten "aten::neg"(%b) on %s1 : (!A) -> !A
  %e = monarch.aten "aten::relu"(%w) on %s1 : (!A) -> !A
  return
}
