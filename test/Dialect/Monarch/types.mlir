// RUN: monarch-opt %s --verify-roundtrip | FileCheck %s
// RUN: monarch-opt %s --emit-bytecode | monarch-opt | FileCheck %s

// Every type, printed back in its canonical form.
// CHECK-LABEL: func.func private @types
// CHECK-SAME: !monarch.mesh<host = 2, gpu = 4>
// CHECK-SAME: !monarch.mesh<>
// CHECK-SAME: !monarch.mesh<"dp rank" = 3>
// CHECK-SAME: !monarch.tensor<4x?xf32, <gpu = 8>>
// CHECK-SAME: !monarch.tensor<i64, <gpu = 8>>
// CHECK-SAME: !monarch.tensor<2xbf16, <gpu = 8>, stream = "comm">
// CHECK-SAME: !monarch.actor<"Trainer", <host = 2, gpu = 4>>
// CHECK-SAME: !monarch.stream<"comm">
// CHECK-SAME: !monarch.borrow
// CHECK-SAME: !monarch.async<!monarch.tensor<4xf32, <gpu = 8>>>
// CHECK-SAME: !monarch.host<tensor<4xf32>>
func.func private @types(
  !monarch.mesh<host = 2, gpu = 4>,
  !monarch.mesh<>,
  !monarch.mesh<"dp rank" = 3>,
  !monarch.tensor<4x?xf32, <gpu = 8>>,
  !monarch.tensor<i64, <gpu = 8>>,
  !monarch.tensor<2xbf16, <gpu = 8>, stream = "comm">,
  !monarch.actor<"Trainer", <host = 2, gpu = 4>>,
  !monarch.stream<"comm">,
  !monarch.borrow,
  !monarch.async<!monarch.tensor<4xf32, <gpu = 8>>>,
  !monarch.host<tensor<4xf32>>)

// The default stream may be spelled out; it prints without the stream.
// CHECK-LABEL: func.func private @default_stream
// CHECK-SAME: (!monarch.tensor<4xf32, <gpu = 8>>)
func.func private @default_stream(!monarch.tensor<4xf32, <gpu = 8>, stream = "">)

// Attributes of ATen arguments.
// CHECK-LABEL: func.func private @attrs
// CHECK-SAME: bool = #monarch.dtype<bool>
// CHECK-SAME: device = #monarch.device<"cuda:1">
// CHECK-SAME: dtype = #monarch.dtype<bfloat16>
// CHECK-SAME: layout = #monarch.layout<sparse_coo>
// CHECK-SAME: memory_format = #monarch.memory_format<preserve_format>
// CHECK-SAME: none = #monarch.none
// CHECK-SAME: scalar = #monarch.scalar<true>
func.func private @attrs() attributes {
  dtype = #monarch.dtype<bfloat16>, layout = #monarch.layout<sparse_coo>,
  device = #monarch.device<"cuda:1">, none = #monarch.none,
  scalar = #monarch.scalar<true>, bool = #monarch.dtype<bool>,
  memory_format = #monarch.memory_format<preserve_format>}
