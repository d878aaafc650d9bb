// RUN: monarch-opt %s --split-input-file --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s

// Each ref is deleted right after its last use, on the mesh and stream that
// defined it; unused results right after their definition; refs used by a
// nested loop live until the loop ends.

// CHECK-LABEL: plan version 1
// CHECK:      %[[A:[0-9]+]] = aten "aten::ones"
// CHECK-NEXT: %[[B:[0-9]+]] = aten "aten::neg"(%[[A]])
// CHECK-NEXT: %[[UNUSED:[0-9]+]] = aten "aten::exp"(%[[B]])
// CHECK-NEXT: delete %[[UNUSED]] on mesh#0
// CHECK-NEXT: %[[C:[0-9]+]] = aten "aten::mul.Tensor"(%[[A]], %[[B]])
// CHECK-NEXT: delete %[[A]], %[[B]] on mesh#0
// CHECK-NEXT: %[[M:[0-9]+]] = send %[[C]] from mesh#1 to mesh#2
// CHECK-NEXT: delete %[[C]] on mesh#0
// CHECK-NEXT: fetch %[[M]] on mesh#3
// CHECK-NEXT: delete %[[M]] on mesh#2
// CHECK-NOT: delete
func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 2>
  %a = monarch.aten "aten::ones"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<2xf32, <host = 2, gpu = 2>>
  %b = monarch.aten "aten::neg"(%a) on %m : (!monarch.tensor<2xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<2xf32, <host = 2, gpu = 2>>
  %unused = monarch.aten "aten::exp"(%b) on %m : (!monarch.tensor<2xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<2xf32, <host = 2, gpu = 2>>
  %c = monarch.aten "aten::mul.Tensor"(%a, %b) on %m : (!monarch.tensor<2xf32, <host = 2, gpu = 2>>, !monarch.tensor<2xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<2xf32, <host = 2, gpu = 2>>
  %h0 = monarch.slice_mesh %c (host = 0) : !monarch.tensor<2xf32, <host = 2, gpu = 2>> -> !monarch.tensor<2xf32, <gpu = 2>>
  %s1 = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 2>
  %moved = monarch.to_mesh %h0 to %s1 : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.tensor<2xf32, <gpu = 2>>
  %v = monarch.inspect %moved at (gpu = 1) : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.host<tensor<2xf32>>
  return
}

// -----

// A value used inside a loop body (captured) lives until the loop ends; the
// loop's initial value dies after the first iteration (the loop consumes it,
// and frees each iteration's carried values as the next replaces them);
// values returned by the entry function are not deleted.

// CHECK-LABEL: plan version 2
// CHECK:      %[[W:[0-9]+]] = aten "aten::ones"
// CHECK-NEXT: %[[X:[0-9]+]] = aten "aten::zeros"
// CHECK-NEXT: %[[R:[0-9]+]] = loop @1 trips 3 carried(%[[X]]) captured(%[[W]]) consumed(%[[X]])
// CHECK-NEXT: delete %[[W]] on mesh#0
// CHECK-NOT: delete
func.func @main() -> !monarch.tensor<2xf32, <gpu = 2>> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %w = monarch.aten "aten::ones"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<2xf32, <gpu = 2>>
  %x = monarch.aten "aten::zeros"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<2xf32, <gpu = 2>>
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %x) -> (!monarch.tensor<2xf32, <gpu = 2>>) {
    %n = monarch.aten "aten::add.Tensor"(%acc, %w, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<2xf32, <gpu = 2>>, !monarch.tensor<2xf32, <gpu = 2>>) -> !monarch.tensor<2xf32, <gpu = 2>>
    scf.yield %n : !monarch.tensor<2xf32, <gpu = 2>>
  }
  return %r : !monarch.tensor<2xf32, <gpu = 2>>
}
