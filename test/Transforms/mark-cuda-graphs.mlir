// RUN: monarch-opt %s --split-input-file --monarch-mark-cuda-graphs | FileCheck %s
// RUN: monarch-opt %s --split-input-file --monarch-mark-cuda-graphs=min-ops=3 | FileCheck %s --check-prefix=MIN3
// RUN: monarch-opt %s --split-input-file --monarch-default-pipeline | FileCheck %s
// RUN: monarch-opt %s --split-input-file --monarch-default-pipeline=cuda-graphs=off | FileCheck %s --check-prefix=OFF
// RUN: monarch-opt %s --split-input-file --monarch-default-pipeline --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s --check-prefix=PLAN
// RUN: not monarch-opt %s --split-input-file --monarch-default-pipeline=cuda-graphs=maybe 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: for the --cuda-graphs option: Cannot find option named 'maybe'!

!T = !monarch.tensor<4xf32, <gpu = 2>>

// A loop body of two ATen calls is a candidate; a body of one is not (a
// graph of one launch saves nothing).
// CHECK-LABEL: func.func @loops
// CHECK:       scf.for
// CHECK:       } {monarch.cuda_graph}
// CHECK:       scf.for
// CHECK-NOT:   monarch.cuda_graph
// CHECK:       return
// MIN3-LABEL:  func.func @loops
// MIN3-NOT:    monarch.cuda_graph
// OFF-LABEL:   func.func @loops
// OFF-NOT:     monarch.cuda_graph
// PLAN-LABEL:  plan version 2
// PLAN:        recording @1({{.*}}) -> ({{.*}}) cuda_graph {
// PLAN:        recording @2({{.*}}) -> ({{.*}}) {
func.func @loops() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %x = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%a = %x) -> (!T) {
    %b = monarch.aten "aten::add.Tensor"(%a, %x, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
    %c = monarch.aten "aten::mul.Tensor"(%b, %x) on %m : (!T, !T) -> !T
    scf.yield %c : !T
  }
  %s = scf.for %i = %c0 to %c8 step %c1 iter_args(%a = %r) -> (!T) {
    %b = monarch.aten "aten::neg"(%a) on %m : (!T) -> !T
    scf.yield %b : !T
  }
  %f = monarch.inspect %s : !T -> !monarch.host<tensor<4xf32>>
  return
}

// -----

!T = !monarch.tensor<4xf32, <gpu = 2>>

// A function is a recording where it is called: it is marked, not its caller.
// CHECK-LABEL: func.func @step
// CHECK-SAME:  attributes {monarch.cuda_graph}
// CHECK-LABEL: func.func @main()
// CHECK-NOT:   monarch.cuda_graph
// OFF-LABEL:   func.func @step
// OFF-NOT:     monarch.cuda_graph
// PLAN-LABEL:  plan version
// PLAN:        recording @1({{.*}}) -> ({{.*}}) cuda_graph {
func.func @step(%m: !monarch.mesh<gpu = 2>, %w: !T) -> !T {
  %a = monarch.aten "aten::mul.Scalar"(%w, #monarch.scalar<2.0 : f64>) on %m : (!T) -> !T
  %b = monarch.aten "aten::relu"(%a) on %m : (!T) -> !T
  return %b : !T
}

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %x = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %y = func.call @step(%m, %x) : (!monarch.mesh<gpu = 2>, !T) -> !T
  %f = monarch.inspect %y : !T -> !monarch.host<tensor<4xf32>>
  return
}
