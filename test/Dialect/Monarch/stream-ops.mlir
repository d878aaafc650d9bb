// RUN: monarch-opt %s --verify-roundtrip | FileCheck %s
// RUN: monarch-opt %s --emit-bytecode | monarch-opt | FileCheck %s

// CHECK-LABEL: func.func @borrow
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<gpu = 8>, %[[T:.*]]: !monarch.tensor<4xf32, <gpu = 8>>)
func.func @borrow(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm"> {
  // CHECK: %[[S:.*]] = monarch.stream_create : !monarch.stream<"comm">
  %s = monarch.stream_create : !monarch.stream<"comm">
  // CHECK: %[[T2:.*]], %[[B:.*]] = monarch.borrow %[[T]] to %[[S]] : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // CHECK: monarch.borrow_first_use %[[B]]
  monarch.borrow_first_use %b
  // An op on the borrowing stream.
  // CHECK: %[[R:.*]] = monarch.reduce %[[T2]] (gpu) sum : !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  %r = monarch.reduce %t2 (gpu) sum : !monarch.tensor<4xf32, <gpu = 8>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // CHECK: monarch.borrow_last_use %[[B]]
  monarch.borrow_last_use %b
  // CHECK: monarch.borrow_drop %[[B]]
  monarch.borrow_drop %b
  // CHECK: return %[[R]]
  return %r : !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
}

// CHECK-LABEL: func.func @mutable_borrow_to_default
// CHECK-SAME: (%[[T:.*]]: !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">)
func.func @mutable_borrow_to_default(%t: !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) {
  // The default stream's handle is the stream named "".
  // CHECK: %[[S:.*]] = monarch.stream_create : !monarch.stream<"">
  %s = monarch.stream_create : !monarch.stream<"">
  // CHECK: %{{.*}}, %[[B:.*]] = monarch.borrow %[[T]] to %[[S]] mutable : !monarch.tensor<4xf32, <gpu = 8>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 8>>
  %t2, %b = monarch.borrow %t to %s mutable : !monarch.tensor<4xf32, <gpu = 8>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 8>>
  // CHECK: monarch.borrow_drop %[[B]]
  monarch.borrow_drop %b
  return
}
