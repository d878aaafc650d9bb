// Verifies, but the lowering cannot run actors yet: a diagnostic naming the op.
func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %t = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %m : () -> !monarch.tensor<4xf32, <gpu = 2>>
  %a = monarch.spawn_actor "trainer" on %m : !monarch.actor<"Trainer", <gpu = 2>>
  %g = monarch.endpoint_call %a "grad" rref(%t) : !monarch.actor<"Trainer", <gpu = 2>>, (!monarch.tensor<4xf32, <gpu = 2>>) -> !monarch.tensor<4xf32, <gpu = 2>>
  %v = monarch.inspect %g : !monarch.tensor<4xf32, <gpu = 2>> -> !monarch.host<tensor<4xf32>>
  return
}
