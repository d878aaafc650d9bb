// RUN: monarch-opt %s --verify-roundtrip | FileCheck %s
// RUN: monarch-opt %s --emit-bytecode | monarch-opt | FileCheck %s

// The four collectives of DESIGN.md §6.2 and their result shapes.
// CHECK-LABEL: func.func @reduce
// CHECK-SAME: (%[[T:.*]]: !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>, %[[O:.*]]: !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>)
func.func @reduce(%t: !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>, %o: !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>) {
  // CHECK: monarch.reduce %[[T]] (gpu) sum : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  %0 = monarch.reduce %t (gpu) sum : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  // CHECK: monarch.reduce %[[T]] (gpu) avg scatter : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<4xf32, <host = 2, gpu = 8>>
  %1 = monarch.reduce %t (gpu) avg scatter : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<4xf32, <host = 2, gpu = 8>>
  // CHECK: monarch.reduce %[[T]] (host) stack : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<2x8x4xf32, <host = 2, gpu = 8>>
  %2 = monarch.reduce %t (host) stack : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<2x8x4xf32, <host = 2, gpu = 8>>
  // CHECK: monarch.reduce %[[T]] (gpu) stack scatter : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  %3 = monarch.reduce %t (gpu) stack scatter : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  // `()` reduces over every dim.
  // CHECK: monarch.reduce %[[T]] () max inplace : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  %4 = monarch.reduce %t () max inplace : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  // CHECK: monarch.reduce %[[T]] (host, gpu) product into %[[O]] : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>, !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  %5 = monarch.reduce %t (host, gpu) product into %o : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>, !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  // CHECK: monarch.reduce %[[T]] (gpu) min : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  %6 = monarch.reduce %t (gpu) min : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
  return
}

// CHECK-LABEL: func.func @reduce_async
// CHECK-SAME: (%[[T:.*]]: !monarch.tensor<8xf32, <gpu = 8>>)
func.func @reduce_async(%t: !monarch.tensor<8xf32, <gpu = 8>>) -> !monarch.tensor<f32, <gpu = 8>> {
  // CHECK: %[[TOK:.*]] = monarch.reduce_start %[[T]] (gpu) sum scatter : !monarch.tensor<8xf32, <gpu = 8>> -> !monarch.async<!monarch.tensor<f32, <gpu = 8>>>
  %tok = monarch.reduce_start %t (gpu) sum scatter : !monarch.tensor<8xf32, <gpu = 8>> -> !monarch.async<!monarch.tensor<f32, <gpu = 8>>>
  // CHECK: %[[R:.*]] = monarch.wait %[[TOK]] : !monarch.async<!monarch.tensor<f32, <gpu = 8>>>
  %r = monarch.wait %tok : !monarch.async<!monarch.tensor<f32, <gpu = 8>>>
  // CHECK: return %[[R]]
  return %r : !monarch.tensor<f32, <gpu = 8>>
}

// CHECK-LABEL: func.func @moves
// CHECK-SAME: (%[[T:.*]]: !monarch.tensor<4xf32, <host = 2, gpu = 4>>, %[[D:.*]]: !monarch.mesh<gpu = 4, x = 3>)
func.func @moves(%t: !monarch.tensor<4xf32, <host = 2, gpu = 4>>, %d: !monarch.mesh<gpu = 4, x = 3>) -> !monarch.tensor<4xf32, <gpu = 4, x = 3>> {
  // CHECK: %[[S:.*]] = monarch.slice_mesh %[[T]] (host = 1) : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  %s = monarch.slice_mesh %t (host = 1) : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  // Dims of the destination missing from the source are broadcast.
  // CHECK: %[[M:.*]] = monarch.to_mesh %[[S]] to %[[D]] : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4, x = 3>>
  %m = monarch.to_mesh %s to %d : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4, x = 3>>
  // CHECK: return %[[M]]
  return %m : !monarch.tensor<4xf32, <gpu = 4, x = 3>>
}

// The async form made by --monarch-async-collectives.
// CHECK-LABEL: func.func @move_async
// CHECK-SAME: (%[[T:.*]]: !monarch.tensor<4xf32, <gpu = 4>>, %[[D:.*]]: !monarch.mesh<gpu = 4, x = 3>)
func.func @move_async(%t: !monarch.tensor<4xf32, <gpu = 4>>, %d: !monarch.mesh<gpu = 4, x = 3>) -> !monarch.tensor<4xf32, <gpu = 4, x = 3>> {
  // CHECK: %[[K:.*]] = monarch.to_mesh_start %[[T]] to %[[D]] : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.async<!monarch.tensor<4xf32, <gpu = 4, x = 3>>>
  %k = monarch.to_mesh_start %t to %d : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.async<!monarch.tensor<4xf32, <gpu = 4, x = 3>>>
  // CHECK: %[[M:.*]] = monarch.wait %[[K]]
  %m = monarch.wait %k : !monarch.async<!monarch.tensor<4xf32, <gpu = 4, x = 3>>>
  // CHECK: return %[[M]]
  return %m : !monarch.tensor<4xf32, <gpu = 4, x = 3>>
}

// CHECK-LABEL: func.func @fetch
// CHECK-SAME: (%[[T:.*]]: !monarch.tensor<4xf32, <host = 2, gpu = 4>>)
func.func @fetch(%t: !monarch.tensor<4xf32, <host = 2, gpu = 4>>) -> (!monarch.host<tensor<4xf32>>, !monarch.host<tensor<4xf32>>) {
  // CHECK: %[[F:.*]] = monarch.fetch_shard %[[T]] at (host = 1, gpu = 3) : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.host<tensor<4xf32>>
  %f = monarch.fetch_shard %t at (host = 1, gpu = 3) : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.host<tensor<4xf32>>
  // Coordinates default to 0.
  // CHECK: %[[I:.*]] = monarch.inspect %[[T]] : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.host<tensor<4xf32>>
  %i = monarch.inspect %t : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.host<tensor<4xf32>>
  // CHECK: return %[[F]], %[[I]]
  return %f, %i : !monarch.host<tensor<4xf32>>, !monarch.host<tensor<4xf32>>
}
