// RUN: monarch-opt %s --monarch-async-collectives | FileCheck %s

!T = !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>

// CHECK-LABEL: func.func @all_forms
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 2, gpu = 8>, %[[T:.*]]: !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>, %[[O:.*]]: !monarch.tensor
func.func @all_forms(%m: !monarch.mesh<host = 2, gpu = 8>, %t: !T, %o: !T) -> (!T, !monarch.tensor<4xf32, <host = 2, gpu = 8>>, !T) {
  // CHECK-NOT: monarch.reduce %
  // CHECK: %[[S1:.*]] = monarch.reduce_start %[[T]] (gpu) sum inplace : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>> -> !monarch.async<!monarch.tensor<8x4xf32, <host = 2, gpu = 8>>>
  // CHECK-NEXT: %[[W1:.*]] = monarch.wait %[[S1]] : !monarch.async<!monarch.tensor<8x4xf32, <host = 2, gpu = 8>>>
  %a = monarch.reduce %t (gpu) sum inplace : !T -> !T
  // CHECK-NEXT: %[[S2:.*]] = monarch.reduce_start %[[W1]] (gpu) avg scatter : {{.*}} -> !monarch.async<!monarch.tensor<4xf32, <host = 2, gpu = 8>>>
  // CHECK-NEXT: %[[W2:.*]] = monarch.wait %[[S2]]
  %b = monarch.reduce %a (gpu) avg scatter : !T -> !monarch.tensor<4xf32, <host = 2, gpu = 8>>
  // CHECK-NEXT: %[[S3:.*]] = monarch.reduce_start %[[T]] (host, gpu) max into %[[O]]
  // CHECK-NEXT: %[[W3:.*]] = monarch.wait %[[S3]]
  %c = monarch.reduce %t (host, gpu) max into %o : !T, !T -> !T
  // CHECK-NEXT: return %[[W1]], %[[W2]], %[[W3]]
  return %a, %b, %c : !T, !monarch.tensor<4xf32, <host = 2, gpu = 8>>, !T
}

// A reduce in a loop body is split where it is.
// CHECK-LABEL: func.func @in_loop
func.func @in_loop(%t: !monarch.tensor<4xf32, <gpu = 8>>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // CHECK: scf.for
  // CHECK-NEXT: %[[S:.*]] = monarch.reduce_start %{{.*}} (gpu) sum
  // CHECK-NEXT: monarch.wait %[[S]]
  // CHECK-NEXT: }
  scf.for %i = %c0 to %n step %c1 {
    %r = monarch.reduce %t (gpu) sum inplace : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>>
  }
  return
}

// to_mesh becomes to_mesh_start + wait.
// CHECK-LABEL: func.func @move
// CHECK-SAME: (%[[T:.*]]: !monarch.tensor<4xf32, <gpu = 4>>, %[[D:.*]]: !monarch.mesh<host = 2, gpu = 4>)
func.func @move(%t: !monarch.tensor<4xf32, <gpu = 4>>, %d: !monarch.mesh<host = 2, gpu = 4>) -> !monarch.tensor<4xf32, <host = 2, gpu = 4>> {
  // CHECK-NEXT: %[[S:.*]] = monarch.to_mesh_start %[[T]] to %[[D]] : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.async<!monarch.tensor<4xf32, <host = 2, gpu = 4>>>
  // CHECK-NEXT: %[[W:.*]] = monarch.wait %[[S]]
  // CHECK-NEXT: return %[[W]]
  %r = monarch.to_mesh %t to %d : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  return %r : !monarch.tensor<4xf32, <host = 2, gpu = 4>>
}
