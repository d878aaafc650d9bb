// RUN: monarch-opt %s --verify-roundtrip | FileCheck %s
// RUN: monarch-opt %s --emit-bytecode | monarch-opt | FileCheck %s

// CHECK-LABEL: func.func @actors
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<gpu = 8>, %[[X:.*]]: !monarch.tensor<4xf32, <gpu = 8>>, %[[LR:.*]]: f64)
func.func @actors(%m: !monarch.mesh<gpu = 8>, %x: !monarch.tensor<4xf32, <gpu = 8>>, %lr: f64) {
  // CHECK: %[[A:.*]] = monarch.spawn_actor "trainer" on %[[M]] args(%[[LR]] : f64) : !monarch.actor<"Trainer", <gpu = 8>>
  %a = monarch.spawn_actor "trainer" on %m args(%lr : f64) : !monarch.actor<"Trainer", <gpu = 8>>
  // CHECK: monarch.endpoint_call %[[A]] "step" call(%[[X]]) : !monarch.actor<"Trainer", <gpu = 8>>, (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.host<f64>
  %0 = monarch.endpoint_call %a "step" call(%x) : !monarch.actor<"Trainer", <gpu = 8>>, (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.host<f64>
  // CHECK: monarch.endpoint_call %[[A]] "loss" choose() : !monarch.actor<"Trainer", <gpu = 8>>, () -> !monarch.host<f64>
  %1 = monarch.endpoint_call %a "loss" choose() : !monarch.actor<"Trainer", <gpu = 8>>, () -> !monarch.host<f64>
  // CHECK: monarch.endpoint_call %[[A]] "log" broadcast(%[[LR]]) : !monarch.actor<"Trainer", <gpu = 8>>, (f64) -> ()
  monarch.endpoint_call %a "log" broadcast(%lr) : !monarch.actor<"Trainer", <gpu = 8>>, (f64) -> ()
  // CHECK: monarch.endpoint_call %[[A]] "grad" rref(%[[X]]) : !monarch.actor<"Trainer", <gpu = 8>>, (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  %2 = monarch.endpoint_call %a "grad" rref(%x) : !monarch.actor<"Trainer", <gpu = 8>>, (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  return
}

// CHECK-LABEL: func.func @call_one
func.func @call_one(%m: !monarch.mesh<>) -> !monarch.host<i64> {
  // CHECK: %[[A:.*]] = monarch.spawn_actor "counter" on %{{.*}} : !monarch.actor<"Counter", <>>
  %a = monarch.spawn_actor "counter" on %m : !monarch.actor<"Counter", <>>
  // CHECK: %[[V:.*]] = monarch.endpoint_call %[[A]] "value" call_one()
  %v = monarch.endpoint_call %a "value" call_one() : !monarch.actor<"Counter", <>>, () -> !monarch.host<i64>
  // CHECK: return %[[V]]
  return %v : !monarch.host<i64>
}
