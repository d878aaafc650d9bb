// RUN: monarch-opt %S/../../../examples/pipeline_forward.mlir --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s
// RUN: monarch-opt %S/../../../examples/pipeline_forward.mlir --canonicalize --monarch-resolve-mesh-views --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s
// RUN: monarch-opt %S/../../../examples/pipeline_forward.mlir --monarch-emit-plan="output=%t.plan entry=pipeline_forward" -o /dev/null
// RUN: od -An -tx1 -N5 %t.plan | FileCheck %s --check-prefix=BINARY

// The example of examples/pipeline_forward.mlir: two pipeline stages (the
// slices pp = 0 and pp = 1 of the renamed root), activations sent from one to
// the other, a reduce on stage 1 and one fetched shard.

// CHECK-LABEL: plan version 1
// CHECK-NEXT: root (host = 2, gpu = 2)
// CHECK-NEXT: mesh#1 = offset 0 (gpu = 2:1)
// CHECK-NEXT: mesh#2 = offset 2 (gpu = 2:1)
// CHECK-NEXT: mesh#3 = offset 3 ()
// CHECK-NEXT: %[[X:[0-9]+]] = aten "aten::rand"([4, 4], float32, None, device("cuda"), None) on mesh#1  // #0
// CHECK-NEXT: %[[W0:[0-9]+]] = aten "aten::rand"([4, 4], float32, None, device("cuda"), None) on mesh#1  // #1
// CHECK-NEXT: %[[H0:[0-9]+]] = aten "aten::mm"(%[[X]], %[[W0]]) on mesh#1  // #2
// CHECK-NEXT: delete %[[X]], %[[W0]] on mesh#1  // #3
// CHECK-NEXT: %[[A0:[0-9]+]] = aten "aten::relu"(%[[H0]]) on mesh#1  // #4
// CHECK-NEXT: delete %[[H0]] on mesh#1  // #5
// CHECK-NEXT: %[[A0S1:[0-9]+]] = send %[[A0]] from mesh#1 to mesh#2 : float32[4, 4]  // #6
// CHECK-NEXT: delete %[[A0]] on mesh#1  // #7
// CHECK-NEXT: %[[W1:[0-9]+]] = aten "aten::rand"([4, 4], float32, None, device("cuda"), None) on mesh#2  // #8
// CHECK-NEXT: %[[H1:[0-9]+]] = aten "aten::mm"(%[[A0S1]], %[[W1]]) on mesh#2  // #9
// CHECK-NEXT: delete %[[A0S1]], %[[W1]] on mesh#2  // #10
// CHECK-NEXT: %[[A1:[0-9]+]] = aten "aten::relu"(%[[H1]]) on mesh#2  // #11
// CHECK-NEXT: delete %[[H1]] on mesh#2  // #12
// CHECK-NEXT: %[[Y:[0-9]+]] = reduce %[[A1]] (gpu) sum : float32[4, 4] on mesh#2  // #13
// CHECK-NEXT: delete %[[A1]] on mesh#2  // #14
// CHECK-NEXT: fetch %[[Y]] on mesh#3  // #15
// CHECK-NEXT: delete %[[Y]] on mesh#2  // #16
// CHECK-NOT: {{.}}

// The binary plan starts with the magic number (field 1, fixed32 "MONP").
// BINARY: 0d 50 4e 4f 4d
