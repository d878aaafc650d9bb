// RUN: monarch-opt %s --monarch-default-pipeline --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s
// RUN: monarch-opt %s --monarch-default-pipeline --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s --check-prefix=FETCH

// One DDP training step (the step of test/Transforms/ddp-overlap.mlir) after
// the default pipeline: all-reduces started on the "comm" stream through
// mutable borrows, the weight updates after each borrow is dropped.

// CHECK-LABEL: plan version 1
// CHECK-NEXT: root (dp = 4)
// CHECK-NEXT: mesh#1 = offset 1 ()
// CHECK-NEXT: stream 1 = "comm"
// CHECK-NEXT: %[[X:[0-9]+]] = aten "aten::rand"
// CHECK-NEXT: %[[W1:[0-9]+]] = aten "aten::rand"
// CHECK-NEXT: %[[W2:[0-9]+]] = aten "aten::rand"
// CHECK-NEXT: %[[W3:[0-9]+]] = aten "aten::rand"
// CHECK:      %[[B:[0-9]+]] = borrow b[[ID:[0-9]+]] %[[G3:[0-9]+]] from stream 0 mutable on mesh#0 stream 1
// CHECK-NEXT: borrow_first_use b[[ID]] on mesh#0 stream 1
// CHECK-NEXT: %[[B]] = reduce %[[B]] (dp) sum inplace : float32[64, 64] on mesh#0 stream 1
// CHECK-NEXT: borrow_last_use b[[ID]] on mesh#0 stream 1
// CHECK:      borrow_drop b[[ID]] on mesh#0{{  }}
// CHECK-NEXT: %[[U3:[0-9]+]] = aten "aten::sub_.Tensor"(%[[W3]], %[[G3]], scalar(0.01)) on mesh#0
// CHECK-NEXT: delete %[[W3]], %[[G3]], %[[U3]] on mesh#0

// The loss is fetched from dp = 1 (a 0-d mesh) and then deleted.
// FETCH: fetch %[[LOSS:[0-9]+]] on mesh#1
// FETCH-NEXT: delete %[[LOSS]] on mesh#0

!T = !monarch.tensor<64x64xf32, <dp = 4>>
!L = !monarch.tensor<f32, <dp = 4>>

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<dp = 4>
  %x = monarch.aten "aten::rand"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %w1 = monarch.aten "aten::rand"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %w2 = monarch.aten "aten::rand"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %w3 = monarch.aten "aten::rand"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %h1 = monarch.aten "aten::mm"(%x, %w1) on %m : (!T, !T) -> !T
  %a1 = monarch.aten "aten::relu"(%h1) on %m : (!T) -> !T
  %h2 = monarch.aten "aten::mm"(%a1, %w2) on %m : (!T, !T) -> !T
  %a2 = monarch.aten "aten::relu"(%h2) on %m : (!T) -> !T
  %h3 = monarch.aten "aten::mm"(%a2, %w3) on %m : (!T, !T) -> !T
  %loss = monarch.aten "aten::sum"(%h3, #monarch.none) on %m : (!T) -> !L
  %d3 = monarch.aten "aten::ones_like"(%h3, #monarch.none, #monarch.none, #monarch.none, #monarch.none, #monarch.none) on %m : (!T) -> !T
  %a2t = monarch.aten "aten::t"(%a2) on %m : (!T) -> !T
  %g3 = monarch.aten "aten::mm"(%a2t, %d3) on %m : (!T, !T) -> !T
  %w3t = monarch.aten "aten::t"(%w3) on %m : (!T) -> !T
  %da2 = monarch.aten "aten::mm"(%d3, %w3t) on %m : (!T, !T) -> !T
  %r3 = monarch.reduce %g3 (dp) sum inplace : !T -> !T
  %u3 = monarch.aten "aten::sub_.Tensor"(%w3, %r3, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  %dh2 = monarch.aten "aten::threshold_backward"(%da2, %h2, #monarch.scalar<0 : i64>) on %m : (!T, !T) -> !T
  %a1t = monarch.aten "aten::t"(%a1) on %m : (!T) -> !T
  %g2 = monarch.aten "aten::mm"(%a1t, %dh2) on %m : (!T, !T) -> !T
  %w2t = monarch.aten "aten::t"(%w2) on %m : (!T) -> !T
  %da1 = monarch.aten "aten::mm"(%dh2, %w2t) on %m : (!T, !T) -> !T
  %r2 = monarch.reduce %g2 (dp) sum inplace : !T -> !T
  %u2 = monarch.aten "aten::sub_.Tensor"(%w2, %r2, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  %dh1 = monarch.aten "aten::threshold_backward"(%da1, %h1, #monarch.scalar<0 : i64>) on %m : (!T, !T) -> !T
  %xt = monarch.aten "aten::t"(%x) on %m : (!T) -> !T
  %g1 = monarch.aten "aten::mm"(%xt, %dh1) on %m : (!T, !T) -> !T
  %r1 = monarch.reduce %g1 (dp) sum inplace : !T -> !T
  %u1 = monarch.aten "aten::sub_.Tensor"(%w1, %r1, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  %v = monarch.inspect %loss at (dp = 1) : !L -> !monarch.host<tensor<f32>>
  return
}
