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
// ALL-NEXT: monarch.aten "aten::neg"
// ALL-NEXT: monarch.wait
// ALL-NEXT: monarch.borrow_last_use
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
