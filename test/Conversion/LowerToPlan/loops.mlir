// RUN: monarch-opt %s --split-input-file --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s

// scf.for with constant bounds: one recording (the body, defined once before
// the program) and one call per iteration. Loop-carried tensors are the first
// formals and the results; tensors captured from above are the other formals.

// CHECK-LABEL: plan version 1
// A formal yielded as is is returned through an alias: every result is a
// distinct ref defined by the body.
// CHECK:      recording @1(%[[ACC:[0-9]+]], %[[PREV:[0-9]+]], %[[WF:[0-9]+]]) -> (%[[N:[0-9]+]], %[[ALIAS:[0-9]+]]) {
// CHECK-NEXT:   %[[N]] = aten "aten::add.Tensor"(%[[ACC]], %[[WF]], scalar(1)) on mesh#0
// CHECK-NEXT:   %[[ALIAS]] = aten "aten::alias"(%[[ACC]]) on mesh#0
// CHECK-NEXT: }
// CHECK-NEXT: %[[W:[0-9]+]] = aten "aten::ones"
// CHECK-NEXT: %[[R1:[0-9]+]], %[[P1:[0-9]+]] = call_recording @1(%[[W]], %[[W]], %[[W]])
// CHECK-NEXT: %[[R2:[0-9]+]], %[[P2:[0-9]+]] = call_recording @1(%[[R1]], %[[P1]], %[[W]])
// CHECK-NEXT: delete %[[R1]], %[[P1]] on mesh#0
// CHECK-NEXT: %[[R3:[0-9]+]], %[[P3:[0-9]+]] = call_recording @1(%[[R2]], %[[P2]], %[[W]])
// CHECK-NEXT: delete %[[R2]], %[[P2]] on mesh#0
// CHECK-NEXT: delete %[[W]], %[[P3]] on mesh#0
// CHECK-NEXT: fetch %[[R3]]
// 1..7 step 2: three iterations; the induction variable is unused.
func.func @main() {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %w = monarch.aten "aten::ones"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<2xf32, <gpu = 2>>
  %r:2 = scf.for %i = %c1 to %c7 step %c2 iter_args(%acc = %w, %prev = %w) -> (!monarch.tensor<2xf32, <gpu = 2>>, !monarch.tensor<2xf32, <gpu = 2>>) {
    %n = monarch.aten "aten::add.Tensor"(%acc, %w, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<2xf32, <gpu = 2>>, !monarch.tensor<2xf32, <gpu = 2>>) -> !monarch.tensor<2xf32, <gpu = 2>>
    scf.yield %n, %acc : !monarch.tensor<2xf32, <gpu = 2>>, !monarch.tensor<2xf32, <gpu = 2>>
  }
  %f = monarch.inspect %r#0 : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.host<tensor<2xf32>>
  return
}

// -----

// Nested loops: the inner loop is a recording called from the outer one's.
// A loop without carried values; a loop that runs zero times is nothing.

// CHECK-LABEL: plan version 1
// CHECK:      recording @2(%[[T:[0-9]+]]) -> () {
// CHECK-NEXT:   aten "aten::add_.Scalar"(%[[T]], scalar(1)) on mesh#0
// CHECK-NEXT:   fetch %[[T]] on mesh#1
// CHECK-NEXT: }
// CHECK-NEXT: recording @1(%[[U:[0-9]+]]) -> () {
// CHECK-NEXT:   call_recording @2(%[[U]])
// CHECK-NEXT:   call_recording @2(%[[U]])
// CHECK-NEXT: }
// CHECK-NEXT: %[[X:[0-9]+]] = aten "aten::zeros"
// CHECK-NEXT: call_recording @1(%[[X]])
// CHECK-NEXT: call_recording @1(%[[X]])
// CHECK-NEXT: call_recording @1(%[[X]])
// CHECK-NEXT: delete %[[X]] on mesh#0
// CHECK-NOT: call_recording
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %x = monarch.aten "aten::zeros"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<2xf32, <gpu = 2>>
  scf.for %i = %c0 to %c3 step %c1 {
    scf.for %j = %c0 to %c2 step %c1 {
      monarch.aten "aten::add_.Scalar"(%x, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<2xf32, <gpu = 2>>) -> ()
      %v = monarch.inspect %x at (gpu = 1) : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.host<tensor<2xf32>>
    }
  }
  scf.for %k = %c3 to %c0 step %c1 {
    monarch.aten "aten::add_.Scalar"(%x, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<2xf32, <gpu = 2>>) -> ()
  }
  return
}

// -----

// Called functions are recordings, one per callee and plan meshes of its
// arguments, defined once and called at every call site.

// CHECK-LABEL: plan version 1
// CHECK-NEXT: root (host = 2, gpu = 4)
// CHECK-NEXT: mesh#1 = offset 0 (gpu = 4:1)
// CHECK-NEXT: mesh#2 = offset 4 (gpu = 4:1)
// CHECK:      recording @1(%[[A:[0-9]+]]) -> (%[[S:[0-9]+]]) {
// CHECK-NEXT:   %[[G:[0-9]+]] = aten "aten::mul.Scalar"(%[[A]], scalar(2)) on mesh#1
// CHECK-NEXT:   %[[S]] = reduce %[[G]] (gpu) avg : float32[4] on mesh#1
// CHECK-NEXT:   delete %[[G]] on mesh#1
// CHECK-NEXT: }
// CHECK-NEXT: recording @2(%[[B:[0-9]+]]) -> (%[[S2:[0-9]+]]) {
// CHECK-NEXT:   %{{[0-9]+}} = aten "aten::mul.Scalar"(%[[B]], scalar(2)) on mesh#2
// CHECK:      %[[X0:[0-9]+]] = aten "aten::ones"{{.*}} on mesh#1
// CHECK-NEXT: %[[Y0:[0-9]+]] = call_recording @1(%[[X0]])
// CHECK-NEXT: delete %[[X0]] on mesh#1
// CHECK-NEXT: %[[Y1:[0-9]+]] = call_recording @1(%[[Y0]])
// CHECK:      %[[X1:[0-9]+]] = aten "aten::ones"{{.*}} on mesh#2
// CHECK-NEXT: %{{[0-9]+}} = call_recording @2(%[[X1]])
func.func @step(%m: !monarch.mesh<gpu = 4>, %w: !monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>> {
  %g = monarch.aten "aten::mul.Scalar"(%w, #monarch.scalar<2.0 : f64>) on %m : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  %r = monarch.reduce %g (gpu) avg : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  return %r : !monarch.tensor<4xf32, <gpu = 4>>
}

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  %h0 = monarch.slice %m (host = 0) : !monarch.mesh<host = 2, gpu = 4>
  %h1 = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
  %x0 = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %h0 : () -> !monarch.tensor<4xf32, <gpu = 4>>
  %y0 = func.call @step(%h0, %x0) : (!monarch.mesh<gpu = 4>, !monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  %y1 = func.call @step(%h0, %y0) : (!monarch.mesh<gpu = 4>, !monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  %x1 = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %h1 : () -> !monarch.tensor<4xf32, <gpu = 4>>
  %y2 = func.call @step(%h1, %x1) : (!monarch.mesh<gpu = 4>, !monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  %f1 = monarch.inspect %y1 : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.host<tensor<4xf32>>
  %f2 = monarch.inspect %y2 : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.host<tensor<4xf32>>
  return
}

// -----

// A borrow inside a loop body lowers into the recording; the executor gives
// its borrow id a fresh value on every call.
// CHECK-LABEL: recording @1(%{{[0-9]+}}) -> () {
// CHECK:   %[[Y:[0-9]+]] = borrow b[[B:[0-9]+]] %{{[0-9]+}}
// CHECK:   aten "aten::mul_.Scalar"(%[[Y]], scalar(2)) on mesh#0 stream 1
// CHECK:   borrow_drop b[[B]]
// CHECK: }
// CHECK-COUNT-2: call_recording @1(
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %x = monarch.aten "aten::zeros"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<2xf32, <gpu = 2>>
  %s = monarch.stream_create : !monarch.stream<"comm">
  scf.for %i = %c0 to %c2 step %c1 {
    %y, %b = monarch.borrow %x to %s mutable : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.tensor<2xf32, <gpu = 2>, stream = "comm">
    %z = monarch.aten "aten::mul_.Scalar"(%y, #monarch.scalar<2.0 : f64>) on %m : (!monarch.tensor<2xf32, <gpu = 2>, stream = "comm">) -> !monarch.tensor<2xf32, <gpu = 2>, stream = "comm">
    monarch.borrow_drop %b
  }
  return
}
