// The DDP example of Monarch's docs, written the naive way (1): the loop over
// grad_generator calls grad.reduce_("dp", "sum") and then updates the
// parameter. The default pipeline must produce the hand-optimized schedule
// (3): each gradient's all-reduce runs on a comm stream, issued as soon as
// the gradient exists (before the backward of the layer below), and the
// borrow is dropped only just before that parameter's update.
//
// RUN: monarch-opt %s --monarch-default-pipeline | FileCheck %s
// RUN: monarch-opt %s --monarch-default-pipeline=bucket-bytes=40000 | FileCheck %s --check-prefix=BUCKET
// RUN: monarch-opt %s --monarch-simulate=profile=%S/Inputs/ddp-profile.json --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAIVE
// RUN: monarch-opt %s --monarch-default-pipeline --monarch-simulate=profile=%S/Inputs/ddp-profile.json --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVERLAP

// The profile makes an all-reduce of a gradient (492us) about as long as a
// matmul (524us). Naive: compute and the three all-reduces in series. After
// the pipeline: about the last all-reduce is exposed (4251.648 + 483.328).
// NAIVE: remark: simulated step 5726.208us; stream default: busy 5726.208us; overlap 0.00
// OVERLAP: remark: simulated step 4734.976us; stream default: busy 4251.648us; stream "comm": busy 1474.560us; overlap 0.67

!T = !monarch.tensor<64x64xf32, <dp = 4>>
!L = !monarch.tensor<f32, <dp = 4>>

func.func @ddp_step(%m: !monarch.mesh<dp = 4>, %x: !T, %w1: !T, %w2: !T, %w3: !T) -> !L {
// With 40000-byte buckets the gradients of w3 and w2 (16 KiB each) share one
// all-reduce, w1's gets its own.
// BUCKET-LABEL: func.func @ddp_step
// BUCKET: %[[FLAT:.*]] = monarch.aten "aten::cat"
// BUCKET-NEXT: %[[FC:.*]], %{{.*}} = monarch.borrow %[[FLAT]] to %{{.*}} mutable
// BUCKET: monarch.reduce_start %[[FC]] (dp) sum inplace : !monarch.tensor<8192xf32, <dp = 4>, stream = "comm">
// BUCKET: monarch.reduce_start %{{.*}} (dp) sum inplace : !monarch.tensor<64x64xf32, <dp = 4>, stream = "comm">
// BUCKET-NOT: monarch.reduce_start
// BUCKET: aten::split_with_sizes

// CHECK-LABEL: func.func @ddp_step
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<dp = 4>, %[[X:[^:]*]]: {{[^%]*}}, %[[W1:[^:]*]]: {{[^%]*}}, %[[W2:[^:]*]]: {{[^%]*}}, %[[W3:[^:]*]]: {{[^%]*}})
// CHECK-NOT: monarch.reduce %
// CHECK: %[[COMM:.*]] = monarch.stream_create : !monarch.stream<"comm">
//
// Forward, unchanged.
// CHECK-NEXT: %[[H1:.*]] = monarch.aten "aten::mm"(%[[X]], %[[W1]])
// CHECK-NEXT: %[[A1:.*]] = monarch.aten "aten::relu"(%[[H1]])
// CHECK-NEXT: %[[H2:.*]] = monarch.aten "aten::mm"(%[[A1]], %[[W2]])
// CHECK-NEXT: %[[A2:.*]] = monarch.aten "aten::relu"(%[[H2]])
// CHECK-NEXT: %[[H3:.*]] = monarch.aten "aten::mm"(%[[A2]], %[[W3]])
// CHECK-NEXT: %[[LOSS:.*]] = monarch.aten "aten::sum"(%[[H3]]
//
// Gradient of w3; its all-reduce runs on the comm stream right away.
// CHECK-NEXT: %[[D3:.*]] = monarch.aten "aten::ones_like"(%[[H3]]
// CHECK-NEXT: %[[A2T:.*]] = monarch.aten "aten::t"(%[[A2]])
// CHECK-NEXT: %[[G3:.*]] = monarch.aten "aten::mm"(%[[A2T]], %[[D3]])
// CHECK-NEXT: %[[G3C:.*]], %[[B3:.*]] = monarch.borrow %[[G3]] to %[[COMM]] mutable
// CHECK-NEXT: monarch.borrow_first_use %[[B3]]
// CHECK-NEXT: %[[T3:.*]] = monarch.reduce_start %[[G3C]] (dp) sum inplace : !monarch.tensor<64x64xf32, <dp = 4>, stream = "comm">
// CHECK-NEXT: monarch.wait %[[T3]]
// CHECK-NEXT: monarch.borrow_last_use %[[B3]]
//
// The backward of layer 2 overlaps it; then the all-reduce of w2's gradient.
// CHECK-NEXT: %[[W3T:.*]] = monarch.aten "aten::t"(%[[W3]])
// CHECK-NEXT: %[[DA2:.*]] = monarch.aten "aten::mm"(%[[D3]], %[[W3T]])
// CHECK-NEXT: %[[DH2:.*]] = monarch.aten "aten::threshold_backward"(%[[DA2]], %[[H2]]
// CHECK-NEXT: %[[A1T:.*]] = monarch.aten "aten::t"(%[[A1]])
// CHECK-NEXT: %[[G2:.*]] = monarch.aten "aten::mm"(%[[A1T]], %[[DH2]])
// CHECK-NEXT: %[[G2C:.*]], %[[B2:.*]] = monarch.borrow %[[G2]] to %[[COMM]] mutable
// CHECK-NEXT: monarch.borrow_first_use %[[B2]]
// CHECK-NEXT: %[[T2:.*]] = monarch.reduce_start %[[G2C]] (dp) sum inplace
// CHECK-NEXT: monarch.wait %[[T2]]
// CHECK-NEXT: monarch.borrow_last_use %[[B2]]
//
// The backward of layer 1 overlaps both; then the all-reduce of w1's gradient.
// CHECK-NEXT: %[[W2T:.*]] = monarch.aten "aten::t"(%[[W2]])
// CHECK-NEXT: %[[DA1:.*]] = monarch.aten "aten::mm"(%[[DH2]], %[[W2T]])
// CHECK-NEXT: %[[DH1:.*]] = monarch.aten "aten::threshold_backward"(%[[DA1]], %[[H1]]
// CHECK-NEXT: %[[XT:.*]] = monarch.aten "aten::t"(%[[X]])
// CHECK-NEXT: %[[G1:.*]] = monarch.aten "aten::mm"(%[[XT]], %[[DH1]])
// CHECK-NEXT: %[[G1C:.*]], %[[B1:.*]] = monarch.borrow %[[G1]] to %[[COMM]] mutable
// CHECK-NEXT: monarch.borrow_first_use %[[B1]]
// CHECK-NEXT: %[[T1:.*]] = monarch.reduce_start %[[G1C]] (dp) sum inplace
// CHECK-NEXT: monarch.wait %[[T1]]
// CHECK-NEXT: monarch.borrow_last_use %[[B1]]
//
// Each drop sits just before its parameter's update, which reads the reduced
// gradient through the origin tensor: the default stream waits for a
// collective only there. (On the comm stream each wait and last use follow
// their start at once.)
// CHECK-NEXT: monarch.borrow_drop %[[B3]]
// CHECK-NEXT: monarch.aten "aten::sub_.Tensor"(%[[W3]], %[[G3]], #monarch.scalar<1.000000e-02 : f64>)
// CHECK-NEXT: monarch.borrow_drop %[[B2]]
// CHECK-NEXT: monarch.aten "aten::sub_.Tensor"(%[[W2]], %[[G2]], #monarch.scalar<1.000000e-02 : f64>)
// CHECK-NEXT: monarch.borrow_drop %[[B1]]
// CHECK-NEXT: monarch.aten "aten::sub_.Tensor"(%[[W1]], %[[G1]], #monarch.scalar<1.000000e-02 : f64>)
// CHECK-NEXT: return %[[LOSS]]
  // Forward.
  %h1 = monarch.aten "aten::mm"(%x, %w1) on %m : (!T, !T) -> !T
  %a1 = monarch.aten "aten::relu"(%h1) on %m : (!T) -> !T
  %h2 = monarch.aten "aten::mm"(%a1, %w2) on %m : (!T, !T) -> !T
  %a2 = monarch.aten "aten::relu"(%h2) on %m : (!T) -> !T
  %h3 = monarch.aten "aten::mm"(%a2, %w3) on %m : (!T, !T) -> !T
  %loss = monarch.aten "aten::sum"(%h3, #monarch.none) on %m : (!T) -> !L
  // grad_generator step 1: gradient of w3.
  %d3 = monarch.aten "aten::ones_like"(%h3, #monarch.none, #monarch.none, #monarch.none, #monarch.none, #monarch.none) on %m : (!T) -> !T
  %a2t = monarch.aten "aten::t"(%a2) on %m : (!T) -> !T
  %g3 = monarch.aten "aten::mm"(%a2t, %d3) on %m : (!T, !T) -> !T
  %w3t = monarch.aten "aten::t"(%w3) on %m : (!T) -> !T
  %da2 = monarch.aten "aten::mm"(%d3, %w3t) on %m : (!T, !T) -> !T
  // grad.reduce_("dp", "sum"); w3 -= lr * grad
  %r3 = monarch.reduce %g3 (dp) sum inplace : !T -> !T
  %u3 = monarch.aten "aten::sub_.Tensor"(%w3, %r3, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  // grad_generator step 2: gradient of w2.
  %dh2 = monarch.aten "aten::threshold_backward"(%da2, %h2, #monarch.scalar<0 : i64>) on %m : (!T, !T) -> !T
  %a1t = monarch.aten "aten::t"(%a1) on %m : (!T) -> !T
  %g2 = monarch.aten "aten::mm"(%a1t, %dh2) on %m : (!T, !T) -> !T
  %w2t = monarch.aten "aten::t"(%w2) on %m : (!T) -> !T
  %da1 = monarch.aten "aten::mm"(%dh2, %w2t) on %m : (!T, !T) -> !T
  %r2 = monarch.reduce %g2 (dp) sum inplace : !T -> !T
  %u2 = monarch.aten "aten::sub_.Tensor"(%w2, %r2, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  // grad_generator step 3: gradient of w1.
  %dh1 = monarch.aten "aten::threshold_backward"(%da1, %h1, #monarch.scalar<0 : i64>) on %m : (!T, !T) -> !T
  %xt = monarch.aten "aten::t"(%x) on %m : (!T) -> !T
  %g1 = monarch.aten "aten::mm"(%xt, %dh1) on %m : (!T, !T) -> !T
  %r1 = monarch.reduce %g1 (dp) sum inplace : !T -> !T
  %u1 = monarch.aten "aten::sub_.Tensor"(%w1, %r1, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  return %loss : !L
}
