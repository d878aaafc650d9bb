// RUN: monarch-opt %s --monarch-default-pipeline | FileCheck %s --check-prefix=ALL
// RUN: monarch-opt %s --monarch-default-pipeline=async-collectives=false | FileCheck %s --check-prefix=NOASYNC
// RUN: monarch-opt %s --monarch-default-pipeline=schedule-overlap=false | FileCheck %s --check-prefix=NOSCHED
// RUN: monarch-opt %s --monarch-default-pipeline="assign-streams=false" | FileCheck %s --check-prefix=NOSTREAMS
// RUN: monarch-opt %s --monarch-default-pipeline="stream=nccl max-in-flight=1" | FileCheck %s --check-prefix=OPTS
// RUN: monarch-opt %s --pass-pipeline="builtin.module(monarch-default-pipeline{verify-borrows=false})" | FileCheck %s --check-prefix=ALL

!T = !monarch.tensor<4xf32, <dp = 8>>

// ALL-LABEL: func.func @step
// ALL: monarch.borrow %{{.*}} mutable
// ALL: monarch.reduce_start {{.*}} stream = "comm"
// ALL-NEXT: monarch.wait
// ALL-NEXT: monarch.borrow_last_use
// ALL-NEXT: monarch.aten "aten::neg"
// ALL-NEXT: monarch.borrow_drop
// ALL-NEXT: monarch.aten "aten::sub_.Tensor"

// NOASYNC-LABEL: func.func @step
// NOASYNC-NEXT: monarch.reduce %{{.*}} (dp) sum inplace
// NOASYNC-NOT: monarch.borrow

// NOSCHED-LABEL: func.func @step
// NOSCHED: monarch.reduce_start {{.*}} stream = "comm"
// NOSCHED-NEXT: monarch.wait
// NOSCHED-NEXT: monarch.borrow_last_use
// NOSCHED-NEXT: monarch.borrow_drop
// NOSCHED-NEXT: monarch.aten "aten::sub_.Tensor"
// NOSCHED-NEXT: monarch.aten "aten::neg"

// NOSTREAMS-LABEL: func.func @step
// NOSTREAMS-NOT: monarch.borrow
// NOSTREAMS: monarch.reduce_start
// NOSTREAMS-NEXT: monarch.aten "aten::neg"
// NOSTREAMS-NEXT: monarch.wait

// OPTS-LABEL: func.func @step
// OPTS: monarch.stream_create : !monarch.stream<"nccl">
// OPTS: monarch.reduce_start {{.*}} stream = "nccl"
func.func @step(%m: !monarch.mesh<dp = 8>, %g: !T, %p: !T, %y: !T) -> (!T, !T) {
  %r = monarch.reduce %g (dp) sum inplace : !T -> !T
  %u = monarch.aten "aten::sub_.Tensor"(%p, %r, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  %n = monarch.aten "aten::neg"(%y) on %m : (!T) -> !T
  return %u, %n : !T, !T
}

// A training loop whose body reads w2 after updating it (the trace of a
// program that computes the input gradient with the new weights): the body
// is scheduled on its own, only the independent t(x) fills the gap, and the
// wait and drop of g2 stay before the update that the read of w2 needs. The
// stream is created once, at the function entry.
// ALL-LABEL: func.func @train_loop
// ALL-SAME: (%[[M:[^:]*]]: {{[^%]*}}, %[[X:[^:]*]]: {{[^%]*}}, %[[W1:[^:]*]]: {{[^%]*}}, %[[W2:[^:]*]]: {{[^%]*}}, %{{.*}}: index)
// ALL-NEXT: %[[COMM:.*]] = monarch.stream_create : !monarch.stream<"comm">
// ALL: scf.for
// ALL: %[[G2:.*]] = monarch.aten "aten::mm"
// ALL-NEXT: %[[G2C:.*]], %[[B2:.*]] = monarch.borrow %[[G2]] to %[[COMM]] mutable
// ALL-NEXT: monarch.borrow_first_use %[[B2]]
// ALL-NEXT: %[[T2:.*]] = monarch.reduce_start %[[G2C]]
// ALL-NEXT: monarch.wait %[[T2]]
// ALL-NEXT: monarch.borrow_last_use %[[B2]]
// ALL-NEXT: monarch.aten "aten::t"(%[[X]])
// ALL-NEXT: monarch.borrow_drop %[[B2]]
// ALL-NEXT: monarch.aten "aten::sub_.Tensor"(%[[W2]], %[[G2]]
// ALL-NEXT: monarch.aten "aten::t"(%[[W2]])
// ALL-NEXT: monarch.aten "aten::mm"
// ALL-NEXT: %[[G1:.*]] = monarch.aten "aten::mm"
// ALL-NEXT: %[[G1C:.*]], %[[B1:.*]] = monarch.borrow %[[G1]] to %[[COMM]] mutable
// ALL-NEXT: monarch.borrow_first_use %[[B1]]
// ALL-NEXT: %[[T1:.*]] = monarch.reduce_start %[[G1C]]
// ALL-NEXT: monarch.wait %[[T1]]
// ALL-NEXT: monarch.borrow_last_use %[[B1]]
// ALL-NEXT: monarch.borrow_drop %[[B1]]
// ALL-NEXT: monarch.aten "aten::sub_.Tensor"(%[[W1]], %[[G1]]
// ALL-NEXT: }
func.func @train_loop(%m: !monarch.mesh<dp = 8>, %x: !T, %w1: !T, %w2: !T, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %h = monarch.aten "aten::mul.Tensor"(%x, %w1) on %m : (!T, !T) -> !T
    %o = monarch.aten "aten::mul.Tensor"(%h, %w2) on %m : (!T, !T) -> !T
    %ht = monarch.aten "aten::t"(%h) on %m : (!T) -> !T
    %g2 = monarch.aten "aten::mm"(%ht, %o) on %m : (!T, !T) -> !T
    %r2 = monarch.reduce %g2 (dp) sum inplace : !T -> !T
    %u2 = monarch.aten "aten::sub_.Tensor"(%w2, %r2, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
    %w2t = monarch.aten "aten::t"(%w2) on %m : (!T) -> !T
    %dh = monarch.aten "aten::mm"(%o, %w2t) on %m : (!T, !T) -> !T
    %xt = monarch.aten "aten::t"(%x) on %m : (!T) -> !T
    %g1 = monarch.aten "aten::mm"(%xt, %dh) on %m : (!T, !T) -> !T
    %r1 = monarch.reduce %g1 (dp) sum inplace : !T -> !T
    %u1 = monarch.aten "aten::sub_.Tensor"(%w1, %r1, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  }
  return
}
