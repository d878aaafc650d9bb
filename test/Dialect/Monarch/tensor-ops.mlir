// RUN: monarch-opt %s --verify-roundtrip | FileCheck %s
// RUN: monarch-opt %s --emit-bytecode | monarch-opt | FileCheck %s

// Every kind of constant argument ATen uses.
// CHECK-LABEL: func.func @aten_factory
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<gpu = 8>)
func.func @aten_factory(%m: !monarch.mesh<gpu = 8>) -> !monarch.tensor<4x4xf32, <gpu = 8>> {
  // CHECK: %[[T:.*]] = monarch.aten "aten::full"(array<i64: 4, 4>, #monarch.scalar<5.000000e-01 : f64>, #monarch.dtype<float32>, #monarch.layout<strided>, #monarch.device<"cuda:0">, #monarch.none) on %[[M]] : () -> !monarch.tensor<4x4xf32, <gpu = 8>>
  %t = monarch.aten "aten::full"(array<i64: 4, 4>, #monarch.scalar<0.5 : f64>, #monarch.dtype<float32>, #monarch.layout<strided>, #monarch.device<"cuda:0">, #monarch.none) on %m : () -> !monarch.tensor<4x4xf32, <gpu = 8>>
  // CHECK: return %[[T]]
  return %t : !monarch.tensor<4x4xf32, <gpu = 8>>
}

// CHECK-LABEL: func.func @aten_args
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<gpu = 8>, %[[A:.*]]: !monarch.tensor<4x4xf32, <gpu = 8>>, %[[B:.*]]: !monarch.tensor<4x4xf32, <gpu = 8>>)
func.func @aten_args(%m: !monarch.mesh<gpu = 8>, %a: !monarch.tensor<4x4xf32, <gpu = 8>>, %b: !monarch.tensor<4x4xf32, <gpu = 8>>) {
  // CHECK: monarch.aten "aten::add.Tensor"(%[[A]], %[[B]], #monarch.scalar<2 : i64>) on %[[M]]
  %0 = monarch.aten "aten::add.Tensor"(%a, %b, #monarch.scalar<2 : i64>) on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>, !monarch.tensor<4x4xf32, <gpu = 8>>) -> !monarch.tensor<4x4xf32, <gpu = 8>>
  // CHECK: monarch.aten "aten::cat"([%[[A]], %[[B]]], 0 : i64) on %[[M]]
  %1 = monarch.aten "aten::cat"([%a, %b], 0 : i64) on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>, !monarch.tensor<4x4xf32, <gpu = 8>>) -> !monarch.tensor<8x4xf32, <gpu = 8>>
  // CHECK: monarch.aten "aten::sum.dim_IntList"(%[[A]], array<i64: 0>, true, #monarch.none) on %[[M]]
  %2 = monarch.aten "aten::sum.dim_IntList"(%a, array<i64: 0>, true, #monarch.none) on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>) -> !monarch.tensor<1x4xf32, <gpu = 8>>
  // CHECK: monarch.aten "aten::div.Tensor_mode"(%[[A]], %[[B]], "floor") on %[[M]]
  %3 = monarch.aten "aten::div.Tensor_mode"(%a, %b, "floor") on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>, !monarch.tensor<4x4xf32, <gpu = 8>>) -> !monarch.tensor<4x4xf32, <gpu = 8>>
  // CHECK: monarch.aten "aten::leaky_relu"(%[[A]], 1.000000e-01 : f64) on %[[M]]
  %4 = monarch.aten "aten::leaky_relu"(%a, 0.1 : f64) on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>) -> !monarch.tensor<4x4xf32, <gpu = 8>>
  // CHECK: monarch.aten "aten::upsample_bilinear2d.vec"(%[[A]], #monarch.none, false, array<f64: 2.000000e+00, 2.000000e+00>) on %[[M]]
  %5 = monarch.aten "aten::upsample_bilinear2d.vec"(%a, #monarch.none, false, array<f64: 2.0, 2.0>) on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>) -> !monarch.tensor<8x8xf32, <gpu = 8>>
  // CHECK: monarch.aten "aten::split.Tensor"(%[[A]], 2 : i64, 0 : i64) on %[[M]] : (!monarch.tensor<4x4xf32, <gpu = 8>>) -> (!monarch.tensor<2x4xf32, <gpu = 8>>, !monarch.tensor<2x4xf32, <gpu = 8>>)
  %6:2 = monarch.aten "aten::split.Tensor"(%a, 2 : i64, 0 : i64) on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>) -> (!monarch.tensor<2x4xf32, <gpu = 8>>, !monarch.tensor<2x4xf32, <gpu = 8>>)
  // `Tensor?[]`: a tensor list with absent entries.
  // CHECK: monarch.aten "aten::index.Tensor"(%[[A]], [#monarch.none, %[[B]]]) on %[[M]]
  %7 = monarch.aten "aten::index.Tensor"(%a, [#monarch.none, %b]) on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>, !monarch.tensor<4x4xf32, <gpu = 8>>) -> !monarch.tensor<4x4xf32, <gpu = 8>>
  // CHECK: monarch.aten "aten::clone"(%[[A]], #monarch.memory_format<channels_last>) on %[[M]]
  %8 = monarch.aten "aten::clone"(%a, #monarch.memory_format<channels_last>) on %m : (!monarch.tensor<4x4xf32, <gpu = 8>>) -> !monarch.tensor<4x4xf32, <gpu = 8>>
  // CHECK: monarch.aten "aten::stack"([], 0 : i64) on %[[M]]
  %9 = monarch.aten "aten::stack"([], 0 : i64) on %m : () -> !monarch.tensor<0xf32, <gpu = 8>>
  // An op with no distributed tensor names its mesh type.
  // CHECK: monarch.aten "aten::manual_seed"(0 : i64) on %[[M]] : () -> () in !monarch.mesh<gpu = 8>
  monarch.aten "aten::manual_seed"(0 : i64) on %m : () -> () in !monarch.mesh<gpu = 8>
  return
}

// CHECK-LABEL: func.func @rank
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 2, gpu = 4>)
func.func @rank(%m: !monarch.mesh<host = 2, gpu = 4>) -> (!monarch.tensor<i64, <host = 2, gpu = 4>>, !monarch.tensor<i64, <host = 2, gpu = 4>>) {
  // CHECK: %[[G:.*]] = monarch.rank %[[M]] (gpu) : !monarch.tensor<i64, <host = 2, gpu = 4>>
  %g = monarch.rank %m (gpu) : !monarch.tensor<i64, <host = 2, gpu = 4>>
  // CHECK: %[[HG:.*]] = monarch.rank %[[M]] (host, gpu) : !monarch.tensor<i64, <host = 2, gpu = 4>>
  %hg = monarch.rank %m (host, gpu) : !monarch.tensor<i64, <host = 2, gpu = 4>>
  // CHECK: return %[[G]], %[[HG]]
  return %g, %hg : !monarch.tensor<i64, <host = 2, gpu = 4>>, !monarch.tensor<i64, <host = 2, gpu = 4>>
}

// CHECK-LABEL: func.func @call_function
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<gpu = 8>, %[[X:.*]]: !monarch.tensor<4xf32, <gpu = 8>>)
func.func @call_function(%m: !monarch.mesh<gpu = 8>, %x: !monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>> {
  // CHECK: %[[Y:.*]] = monarch.call_function "my_pkg.scale"(%[[X]], 2 : i64) on %[[M]] : (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  %y = monarch.call_function "my_pkg.scale"(%x, 2 : i64) on %m : (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  // CHECK: return %[[Y]]
  return %y : !monarch.tensor<4xf32, <gpu = 8>>
}

// Different view ops that resolve to the same layout of one root are the same
// mesh: no WRONG_MESH.
// CHECK-LABEL: func.func @same_mesh_two_views
func.func @same_mesh_two_views() -> !monarch.tensor<4xf32, <gpu = 4>> {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: %[[A:.*]] = monarch.slice
  %a = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: %[[B:.*]] = monarch.view
  %b = monarch.view %m offset 4 (gpu = 4:1) : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: %[[T:.*]] = monarch.aten "aten::ones"(array<i64: 4>) on %[[A]]
  %t = monarch.aten "aten::ones"(array<i64: 4>) on %a : () -> !monarch.tensor<4xf32, <gpu = 4>>
  // CHECK: monarch.aten "aten::neg"(%[[T]]) on %[[B]]
  %u = monarch.aten "aten::neg"(%t) on %b : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  return %u : !monarch.tensor<4xf32, <gpu = 4>>
}
