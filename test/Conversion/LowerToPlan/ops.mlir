// RUN: monarch-opt %s --split-input-file --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s

// Per-op lowering: ATen calls with every kind of constant argument.

// CHECK-LABEL: plan version 1
// CHECK-NEXT: root (gpu = 4)
// CHECK-NEXT: %[[A:[0-9]+]] = aten "aten::full"([4, 4], scalar(0.5), float32, strided, device("cuda:0"), None) on mesh#0  // #0
// CHECK-NEXT: %[[B:[0-9]+]] = aten "aten::add.Tensor"(%[[A]], %[[A]], scalar(2)) on mesh#0
// CHECK: %[[C:[0-9]+]] = aten "aten::cat"([%[[A]], %[[B]]], 0) on mesh#0
// CHECK: %[[D:[0-9]+]] = aten "aten::index.Tensor"(%[[C]], [None, %[[A]]]) on mesh#0
// CHECK: %[[E:[0-9]+]] = aten "aten::upsample"(%[[D]], [2, 2], true, [1.5, 2], "floor", [true, false], float64, 7, preserve_format, channels_last, scalar(true), sparse_coo, -3) on mesh#0
// CHECK: %[[F:[0-9]+]], %[[G:[0-9]+]] = call_function "my_pkg.split"(%[[E]], 2) on mesh#0
// CHECK: {{^}}aten "aten::manual_seed"(0) on mesh#0
// An empty list is still a list (the size of a 0-d tensor).
// CHECK: aten "aten::zeros"([], float32, None, None, None) on mesh#0
func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 4>
  %a = monarch.aten "aten::full"(array<i64: 4, 4>, #monarch.scalar<5.000000e-01 : f64>, #monarch.dtype<float32>, #monarch.layout<strided>, #monarch.device<"cuda:0">, #monarch.none) on %m : () -> !monarch.tensor<4x4xf32, <gpu = 4>>
  %b = monarch.aten "aten::add.Tensor"(%a, %a, #monarch.scalar<2 : i64>) on %m : (!monarch.tensor<4x4xf32, <gpu = 4>>, !monarch.tensor<4x4xf32, <gpu = 4>>) -> !monarch.tensor<4x4xf32, <gpu = 4>>
  %c = monarch.aten "aten::cat"([%a, %b], 0 : i64) on %m : (!monarch.tensor<4x4xf32, <gpu = 4>>, !monarch.tensor<4x4xf32, <gpu = 4>>) -> !monarch.tensor<8x4xf32, <gpu = 4>>
  %d = monarch.aten "aten::index.Tensor"(%c, [#monarch.none, %a]) on %m : (!monarch.tensor<8x4xf32, <gpu = 4>>, !monarch.tensor<4x4xf32, <gpu = 4>>) -> !monarch.tensor<4x4xf32, <gpu = 4>>
  %e = monarch.aten "aten::upsample"(%d, array<i64: 2, 2>, true, array<f64: 1.5, 2.0>, "floor", array<i1: true, false>, #monarch.dtype<float64>, 7 : i64, #monarch.memory_format<preserve_format>, #monarch.memory_format<channels_last>, #monarch.scalar<true>, #monarch.layout<sparse_coo>, -3 : i64) on %m : (!monarch.tensor<4x4xf32, <gpu = 4>>) -> !monarch.tensor<8x8xf32, <gpu = 4>>
  %f:2 = monarch.call_function "my_pkg.split"(%e, 2 : i64) on %m : (!monarch.tensor<8x8xf32, <gpu = 4>>) -> (!monarch.tensor<4x8xf32, <gpu = 4>>, !monarch.tensor<4x8xf32, <gpu = 4>>)
  monarch.aten "aten::manual_seed"(0 : i64) on %m : () -> () in !monarch.mesh<gpu = 4>
  %z = monarch.aten "aten::zeros"(array<i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<f32, <gpu = 4>>
  return
}

// -----

// rank, and every form of reduce.

// CHECK-LABEL: plan version 1
// CHECK-NEXT: root (host = 2, gpu = 4)
// CHECK-NEXT: mesh#1 = offset 0 ()
// CHECK-NEXT: %[[R:[0-9]+]] = rank (host, gpu) on mesh#0
// CHECK: %[[T:[0-9]+]] = aten "aten::ones"
// CHECK-NEXT: %[[O:[0-9]+]] = aten "aten::zeros"
// CHECK-NEXT: %[[S:[0-9]+]] = reduce %[[T]] (gpu) sum : float32[4, 4] on mesh#0
// CHECK: %[[AV:[0-9]+]] = reduce %[[T]] (gpu) avg scatter : float32[4, 4] on mesh#0
// CHECK: %[[G:[0-9]+]] = reduce %[[T]] (host) stack : float32[4, 4] on mesh#0
// CHECK: %[[S]] = reduce %[[S]] (gpu) max inplace : float32[4, 4] on mesh#0
// CHECK-NEXT: %[[P:[0-9]+]] = reduce %[[T]] (host, gpu) product into %[[O]] : float32[4, 4] on mesh#0
func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  %r = monarch.rank %m (host, gpu) : !monarch.tensor<i64, <host = 2, gpu = 4>>
  %t = monarch.aten "aten::ones"(array<i64: 4, 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<4x4xf32, <host = 2, gpu = 4>>
  %o = monarch.aten "aten::zeros"(array<i64: 4, 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<4x4xf32, <host = 2, gpu = 4>>
  %s = monarch.reduce %t (gpu) sum : !monarch.tensor<4x4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4x4xf32, <host = 2, gpu = 4>>
  %av = monarch.reduce %t (gpu) avg scatter : !monarch.tensor<4x4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  %g = monarch.reduce %t (host) stack : !monarch.tensor<4x4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<2x4x4xf32, <host = 2, gpu = 4>>
  %i = monarch.reduce %s (gpu) max inplace : !monarch.tensor<4x4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4x4xf32, <host = 2, gpu = 4>>
  %p = monarch.reduce %t (host, gpu) product into %o : !monarch.tensor<4x4xf32, <host = 2, gpu = 4>>, !monarch.tensor<4x4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4x4xf32, <host = 2, gpu = 4>>
  %f = monarch.inspect %i : !monarch.tensor<4x4xf32, <host = 2, gpu = 4>> -> !monarch.host<tensor<4x4xf32>>
  return
}
// The in-place reduce's result is its input's ref; inspect fetches from the
// 0-d mesh at coordinates 0.
// CHECK: fetch %[[S]] on mesh#1

// -----

// Moves between meshes, fetches, streams and borrows, async reduce.

// CHECK-LABEL: plan version 1
// CHECK-NEXT: root (host = 2, gpu = 4)
// CHECK-NEXT: mesh#1 = offset 0 (gpu = 4:1)
// CHECK-NEXT: mesh#2 = offset 4 (gpu = 4:1)
// CHECK-NEXT: mesh#3 = offset 6 ()
// CHECK-NEXT: stream 1 = "comm"
// CHECK-NEXT: %[[T:[0-9]+]] = aten "aten::ones"({{.*}}) on mesh#0
// CHECK-NEXT: %[[U:[0-9]+]] = send %[[T]] from mesh#1 to mesh#2 : float32[4]
// CHECK-NEXT: %[[TOK:[0-9]+]] = reduce %[[U]] (gpu) sum : float32[4] on mesh#2
// CHECK: fetch %[[TOK]] on mesh#3
// CHECK: %[[B:[0-9]+]] = borrow b1 %[[T]] from stream 0 on mesh#0 stream 1
// CHECK-NEXT: borrow_first_use b1 on mesh#0 stream 1
// CHECK-NEXT: %[[RB:[0-9]+]] = reduce %[[B]] (host) avg : float32[4] on mesh#0 stream 1
// CHECK-NEXT: borrow_last_use b1 on mesh#0 stream 1
// CHECK-NEXT: borrow_drop b1 on mesh#0{{  }}
// CHECK-NEXT: delete %[[T]] on mesh#0{{  }}
// CHECK-NEXT: fetch %[[RB]] on mesh#3 stream 1
// CHECK-NEXT: delete %[[RB]] on mesh#0 stream 1
func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  %t = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  %h1 = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
  %s = monarch.slice_mesh %t (host = 0) : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  %u = monarch.to_mesh %s to %h1 : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  %tok = monarch.reduce_start %u (gpu) sum : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.async<!monarch.tensor<4xf32, <gpu = 4>>>
  %w = monarch.wait %tok : !monarch.async<!monarch.tensor<4xf32, <gpu = 4>>>
  %f = monarch.fetch_shard %w at (gpu = 2) : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.host<tensor<4xf32>>
  %comm = monarch.stream_create : !monarch.stream<"comm">
  %t2, %b = monarch.borrow %t to %comm : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <host = 2, gpu = 4>, stream = "comm">
  monarch.borrow_first_use %b
  %r = monarch.reduce %t2 (host) avg : !monarch.tensor<4xf32, <host = 2, gpu = 4>, stream = "comm"> -> !monarch.tensor<4xf32, <host = 2, gpu = 4>, stream = "comm">
  monarch.borrow_last_use %b
  monarch.borrow_drop %b
  %v = monarch.inspect %r at (host = 1, gpu = 2) : !monarch.tensor<4xf32, <host = 2, gpu = 4>, stream = "comm"> -> !monarch.host<tensor<4xf32>>
  return
}
