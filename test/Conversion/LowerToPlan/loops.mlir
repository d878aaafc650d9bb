// RUN: monarch-opt %s --split-input-file --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s

// scf.for with constant bounds: one recording (the body, defined once before
// the program) and ONE loop instruction, whatever the number of trips (the
// runtime runs the iterations; docs/plan.md, `loop`). Loop-carried tensors
// are the first formals and the results; tensors captured from above are
// the next formals; induction tensors (monarch.index_tensor of the induction
// variable) the last. A plan with a loop is schema version 2.

// CHECK-LABEL: plan version 2
// A formal yielded as is is returned through an alias: every result is a
// distinct ref defined by the body.
// CHECK:      recording @1(%[[ACC:[0-9]+]], %[[PREV:[0-9]+]], %[[WF:[0-9]+]]) -> (%[[N:[0-9]+]], %[[ALIAS:[0-9]+]]) {
// CHECK-NEXT:   %[[N]] = aten "aten::add.Tensor"(%[[ACC]], %[[WF]], scalar(1)) on mesh#0
// CHECK-NEXT:   %[[ALIAS]] = aten "aten::alias"(%[[ACC]]) on mesh#0
// CHECK-NEXT: }
// CHECK-NEXT: %[[W:[0-9]+]] = aten "aten::ones"
// w is carried twice and captured: every iteration reads it, so the loop does
// not consume it.
// CHECK-NEXT: %[[R:[0-9]+]], %[[P:[0-9]+]] = loop @1 trips 3 carried(%[[W]], %[[W]]) captured(%[[W]])  // #
// CHECK-NEXT: delete %[[W]], %[[P]] on mesh#0
// CHECK-NEXT: fetch %[[R]]
// CHECK-NOT:  loop
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

// Nested loops: the inner loop is a recording looped over in the outer one's.
// A loop without carried values; a loop that runs zero times is nothing.

// CHECK-LABEL: plan version 2
// CHECK:      recording @2(%[[T:[0-9]+]]) -> () {
// CHECK-NEXT:   aten "aten::add_.Scalar"(%[[T]], scalar(1)) on mesh#0
// CHECK-NEXT:   fetch %[[T]] on mesh#1
// CHECK-NEXT: }
// CHECK-NEXT: recording @1(%[[U:[0-9]+]]) -> () {
// CHECK-NEXT:   loop @2 trips 2 captured(%[[U]])
// CHECK-NEXT: }
// CHECK-NEXT: %[[X:[0-9]+]] = aten "aten::zeros"
// CHECK-NEXT: loop @1 trips 3 captured(%[[X]])
// CHECK-NEXT: delete %[[X]] on mesh#0
// CHECK-NOT: loop
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
// arguments, defined once and called at every call site. Without a loop the
// plan is schema version 1 (runtimes older than `loop` run it).

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
// CHECK: loop @1 trips 2 captured(
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

// -----

// The induction variable as tensors (monarch.index_tensor): one induction
// formal per (mesh, stream) it is used on -- two uses on one mesh share it,
// a comm-stream one and one on a 0-d slice are their own -- valued
// lower + k*step (5, 6, ..., 9). The loop is x0's last use: it consumes x0
// (frees it after the first iteration). A constant index is an
// aten::scalar_tensor.

// CHECK-LABEL: plan version 2
// CHECK:      mesh#1 = offset 1 ()
// CHECK:      stream 1 = "comm"
// CHECK:      recording @1(%[[ACC:[0-9]+]], %[[WF:[0-9]+]], %[[S:[0-9]+]], %[[SC:[0-9]+]], %[[S1:[0-9]+]]) -> (%[[N3:[0-9]+]]) {
// CHECK-NEXT:   %[[N:[0-9]+]] = aten "aten::add.Tensor"(%[[ACC]], %[[S]], scalar(1)) on mesh#0
// CHECK-NEXT:   %[[N2:[0-9]+]] = aten "aten::add.Tensor"(%[[N]], %[[S]], scalar(1)) on mesh#0
// CHECK-NEXT:   delete %[[N]] on mesh#0
// CHECK-NEXT:   %[[N3]] = aten "aten::add.Tensor"(%[[N2]], %[[WF]], scalar(1)) on mesh#0
// CHECK-NEXT:   delete %[[N2]] on mesh#0
// CHECK-NEXT:   fetch %[[S1]] on mesh#1
// CHECK-NEXT:   fetch %[[SC]] on mesh#{{[0-9]+}} stream 1
// CHECK-NEXT: }
// CHECK-NEXT: %[[W:[0-9]+]] = aten "aten::ones"
// CHECK-NEXT: %[[X0:[0-9]+]] = aten "aten::zeros"
// CHECK-NEXT: %[[X:[0-9]+]] = loop @1 trips 5 carried(%[[X0]]) captured(%[[W]]) induction(5 + k*1 on mesh#0, mesh#0 stream 1, mesh#1) consumed(%[[X0]])
// CHECK-NEXT: delete %[[W]] on mesh#0
// CHECK-NEXT: %[[K:[0-9]+]] = aten "aten::scalar_tensor"(scalar(3), dtype = int64) on mesh#0
!T = !monarch.tensor<2xf32, <gpu = 2>>
!I = !monarch.tensor<i64, <gpu = 2>>
!IC = !monarch.tensor<i64, <gpu = 2>, stream = "comm">
!S = !monarch.tensor<i64, <>>
func.func @main() {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c10 = arith.constant 10 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %one = monarch.slice %m (gpu = 1) : !monarch.mesh<gpu = 2>
  %comm = monarch.stream_create : !monarch.stream<"comm">
  %w = monarch.aten "aten::ones"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %x0 = monarch.aten "aten::zeros"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %x = scf.for %i = %c5 to %c10 step %c1 iter_args(%acc = %x0) -> (!T) {
    %s = monarch.index_tensor %i on %m : !I
    %s2 = monarch.index_tensor %i on %m : !I
    %sc = monarch.index_tensor %i on %m : !IC
    %s1 = monarch.index_tensor %i on %one : !S
    %n = monarch.aten "aten::add.Tensor"(%acc, %s, #monarch.scalar<1 : i64>) on %m : (!T, !I) -> !T
    %n2 = monarch.aten "aten::add.Tensor"(%n, %s2, #monarch.scalar<1 : i64>) on %m : (!T, !I) -> !T
    %n3 = monarch.aten "aten::add.Tensor"(%n2, %w, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
    %f = monarch.fetch_shard %s1 : !S -> !monarch.host<tensor<i64>>
    %g = monarch.fetch_shard %sc : !IC -> !monarch.host<tensor<i64>>
    scf.yield %n3 : !T
  }
  %k = monarch.index_tensor %c3 on %m : !I
  %f = monarch.inspect %x : !T -> !monarch.host<tensor<2xf32>>
  %fk = monarch.inspect %k : !I -> !monarch.host<tensor<i64>>
  return
}

// -----

// An outer loop's induction variable used in an inner loop: the inner loop
// captures the outer one's induction tensor, and has its own. A loop of zero
// trips that carries values gives its initial values (aliases).

// CHECK-LABEL: plan version 2
// CHECK:      recording @2(%[[X:[0-9]+]], %[[OI:[0-9]+]], %[[J:[0-9]+]]) -> () {
// CHECK-NEXT:   %[[T:[0-9]+]] = aten "aten::mul.Tensor"(%[[OI]], %[[J]]) on mesh#0
// CHECK-NEXT:   aten "aten::add_.Tensor"(%[[X]], %[[T]], scalar(1)) on mesh#0
// CHECK-NEXT:   delete %[[T]] on mesh#0
// CHECK-NEXT: }
// CHECK-NEXT: recording @1(%[[XO:[0-9]+]], %[[I:[0-9]+]]) -> () {
// CHECK-NEXT:   loop @2 trips 2 captured(%[[XO]], %[[I]]) induction(0 + k*1 on mesh#0)
// CHECK-NEXT: }
// CHECK-NEXT: %[[X0:[0-9]+]] = aten "aten::zeros"
// CHECK-NEXT: loop @1 trips 4 captured(%[[X0]]) induction(0 + k*1 on mesh#0)
// CHECK-NEXT: %[[R:[0-9]+]] = aten "aten::alias"(%[[X0]]) on mesh#0
// CHECK-NEXT: delete %[[X0]] on mesh#0
// CHECK-NEXT: fetch %[[R]]
!T = !monarch.tensor<2xf32, <gpu = 2>>
!I = !monarch.tensor<i64, <gpu = 2>>
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %x = monarch.aten "aten::zeros"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c2 step %c1 {
      %si = monarch.index_tensor %i on %m : !I
      %sj = monarch.index_tensor %j on %m : !I
      %t = monarch.aten "aten::mul.Tensor"(%si, %sj) on %m : (!I, !I) -> !I
      monarch.aten "aten::add_.Tensor"(%x, %t, #monarch.scalar<1 : i64>) on %m : (!T, !I) -> ()
    }
  }
  %r = scf.for %i = %c4 to %c0 step %c1 iter_args(%a = %x) -> (!T) {
    scf.yield %a : !T
  }
  %f = monarch.inspect %r : !T -> !monarch.host<tensor<2xf32>>
  return
}
