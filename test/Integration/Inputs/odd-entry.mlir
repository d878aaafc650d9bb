// Two functions, the entry's name needing quotes in a pass option
// (external-compile.test): a space, a comma, braces and '='.
func.func @"odd name, {x=1}"() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %t = monarch.aten "aten::ones"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<2xf32, <gpu = 2>>
  %s = monarch.reduce %t (gpu) sum : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.tensor<2xf32, <gpu = 2>>
  %f = monarch.fetch_shard %s : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.host<tensor<2xf32>>
  return
}

func.func @other() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 4>
  return
}
