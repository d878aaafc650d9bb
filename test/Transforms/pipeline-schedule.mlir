// RUN: monarch-opt %s --split-input-file --monarch-pipeline-schedule=schedule=1f1b --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s --check-prefix=ONEF
// RUN: monarch-opt %s --split-input-file --monarch-pipeline-schedule=schedule=gpipe --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s --check-prefix=GPIPE
// RUN: monarch-opt %s --split-input-file --monarch-pipeline-schedule=report=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Two stages, three microbatches, as the frontend traces a step written in
// GPipe order: every microbatch's forward (stage 0, to_mesh, stage 1), then
// every backward (stage 1, to_mesh back, stage 0), then the accumulated
// gradient is fetched. Locations name the unit of each op: sN.Fj / sN.Bj.
//
// 1F1B: stage 0 (warm-up 2) runs F0 F1 B0 F2 B1 B2; stage 1 (warm-up 1)
// F0 B0 F1 B1 F2 B2. The last stage's forward belongs to its backward unit
// (it computes what the backward transfer sends). A transfer of slot k goes
// after the other ops of slot k (s0.F1.send after stage 1's B0 compute).
// ONEF-LABEL: func.func @pipeline
// ONEF: loc("s0.F0.data")
// ONEF: loc("s0.F0")
// ONEF: loc("s0.F0.send")
// ONEF: loc("s1.F0")
// ONEF: loc("s0.F1.data")
// ONEF: loc("s0.F1")
// ONEF: loc("s1.B0")
// ONEF: loc("s0.F1.send")
// ONEF: loc("s1.B0.send")
// ONEF: loc("s0.B0")
// ONEF: loc("s1.F1")
// ONEF: loc("s0.F2.data")
// ONEF: loc("s0.F2")
// ONEF: loc("s1.B1")
// ONEF: loc("s0.F2.send")
// ONEF: loc("s1.B1.send")
// ONEF: loc("s0.B1")
// ONEF: loc("s0.acc1")
// ONEF: loc("s1.F2")
// ONEF: loc("s1.B2")
// ONEF: loc("s1.B2.send")
// ONEF: loc("s0.B2")
// ONEF: loc("s0.acc2")
// ONEF: loc("fetch")

// GPipe: stage 0 runs every forward before any backward; stage 1 runs each
// microbatch's forward and backward back to back as soon as it arrives.
// GPIPE-LABEL: func.func @pipeline
// GPIPE: loc("s0.F0.data")
// GPIPE: loc("s0.F0")
// GPIPE: loc("s0.F0.send")
// GPIPE: loc("s0.F1.data")
// GPIPE: loc("s0.F1")
// GPIPE: loc("s0.F1.send")
// GPIPE: loc("s0.F2.data")
// GPIPE: loc("s0.F2")
// GPIPE: loc("s0.F2.send")
// GPIPE: loc("s1.F0")
// GPIPE: loc("s1.B0")
// GPIPE: loc("s1.B0.send")
// GPIPE: loc("s0.B0")
// GPIPE: loc("fetch")

// REPORT: remark: pipeline schedule 1f1b: 2 stages, 6 transfers
func.func @pipeline() {
  %root = monarch.spawn_procs : !monarch.mesh<pp = 2, dp = 1>
  %s0 = monarch.slice %root (pp = 0) : !monarch.mesh<pp = 2, dp = 1>
  %s1 = monarch.slice %root (pp = 1) : !monarch.mesh<pp = 2, dp = 1>
  // Forward of every microbatch (stage 0, transfer, stage 1), as traced.
  %x0 = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s0 : () -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F0.data")
  %a0 = monarch.aten "aten::tanh"(%x0) on %s0 : (!monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F0")
  %r0 = monarch.to_mesh %a0 to %s1 : !monarch.tensor<4xf32, <dp = 1>> -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F0.send")
  %y0 = monarch.aten "aten::tanh"(%r0) on %s1 : (!monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.F0")
  %x1 = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s0 : () -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F1.data")
  %a1 = monarch.aten "aten::tanh"(%x1) on %s0 : (!monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F1")
  %r1 = monarch.to_mesh %a1 to %s1 : !monarch.tensor<4xf32, <dp = 1>> -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F1.send")
  %y1 = monarch.aten "aten::tanh"(%r1) on %s1 : (!monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.F1")
  %x2 = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s0 : () -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F2.data")
  %a2 = monarch.aten "aten::tanh"(%x2) on %s0 : (!monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F2")
  %r2 = monarch.to_mesh %a2 to %s1 : !monarch.tensor<4xf32, <dp = 1>> -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.F2.send")
  %y2 = monarch.aten "aten::tanh"(%r2) on %s1 : (!monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.F2")
  // Backward of every microbatch (stage 1, transfer, stage 0).
  %g0 = monarch.aten "aten::mul.Tensor"(%y0, %y0) on %s1 : (!monarch.tensor<4xf32, <dp = 1>>, !monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.B0")
  %q0 = monarch.to_mesh %g0 to %s0 : !monarch.tensor<4xf32, <dp = 1>> -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.B0.send")
  %b0 = monarch.aten "aten::mul.Tensor"(%q0, %x0) on %s0 : (!monarch.tensor<4xf32, <dp = 1>>, !monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.B0")
  %g1 = monarch.aten "aten::mul.Tensor"(%y1, %y1) on %s1 : (!monarch.tensor<4xf32, <dp = 1>>, !monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.B1")
  %q1 = monarch.to_mesh %g1 to %s0 : !monarch.tensor<4xf32, <dp = 1>> -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.B1.send")
  %b1 = monarch.aten "aten::mul.Tensor"(%q1, %x1) on %s0 : (!monarch.tensor<4xf32, <dp = 1>>, !monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.B1")
  %g2 = monarch.aten "aten::mul.Tensor"(%y2, %y2) on %s1 : (!monarch.tensor<4xf32, <dp = 1>>, !monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.B2")
  %q2 = monarch.to_mesh %g2 to %s0 : !monarch.tensor<4xf32, <dp = 1>> -> !monarch.tensor<4xf32, <dp = 1>> loc("s1.B2.send")
  %b2 = monarch.aten "aten::mul.Tensor"(%q2, %x2) on %s0 : (!monarch.tensor<4xf32, <dp = 1>>, !monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.B2")
  %acc1 = monarch.aten "aten::add.Tensor"(%b0, %b1) on %s0 : (!monarch.tensor<4xf32, <dp = 1>>, !monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.acc1")
  %acc2 = monarch.aten "aten::add.Tensor"(%acc1, %b2) on %s0 : (!monarch.tensor<4xf32, <dp = 1>>, !monarch.tensor<4xf32, <dp = 1>>) -> !monarch.tensor<4xf32, <dp = 1>> loc("s0.acc2")
  %v = monarch.fetch_shard %acc2 at (dp = 0) : !monarch.tensor<4xf32, <dp = 1>> -> !monarch.host<tensor<4xf32>> loc("fetch")

  return
}

// -----

// Three meshes that are not one chain (stage 0 feeds both others): left
// unchanged, with a remark when asked.
// ONEF-LABEL: func.func @not_a_chain
// ONEF: loc("b")
// ONEF: loc("c")
// REPORT: remark: pipeline schedule: left unchanged: the stage meshes do not form one chain
!U = !monarch.tensor<4xf32, <dp = 1>>
func.func @not_a_chain() {
  %root = monarch.spawn_procs : !monarch.mesh<pp = 3, dp = 1>
  %s0 = monarch.slice %root (pp = 0) : !monarch.mesh<pp = 3, dp = 1>
  %s1 = monarch.slice %root (pp = 1) : !monarch.mesh<pp = 3, dp = 1>
  %s2 = monarch.slice %root (pp = 2) : !monarch.mesh<pp = 3, dp = 1>
  %x = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %s0 : () -> !U loc("a")
  %y = monarch.to_mesh %x to %s1 : !U -> !U loc("b")
  %z = monarch.to_mesh %x to %s2 : !U -> !U loc("c")
  return
}
