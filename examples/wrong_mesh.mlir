// The pipeline of pipeline_forward.mlir with one mistake: stage 1 multiplies
// stage 0's activations without moving them first (`x.to_mesh(stages[1])`
// forgotten). The compiler rejects it before anything is launched.
func.func @forgot_to_mesh() {
  %mesh = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 2>
  %s0 = monarch.slice %mesh (host = 0) : !monarch.mesh<host = 2, gpu = 2>
  %s1 = monarch.slice %mesh (host = 1) : !monarch.mesh<host = 2, gpu = 2>
  %x = monarch.aten "aten::rand"(array<i64: 4, 4>, #monarch.none, #monarch.none, #monarch.none, #monarch.none) on %s0 : () -> !monarch.tensor<4x4xf32, <gpu = 2>>
  %w = monarch.aten "aten::rand"(array<i64: 4, 4>, #monarch.none, #monarch.none, #monarch.none, #monarch.none) on %s1 : () -> !monarch.tensor<4x4xf32, <gpu = 2>>
  %y = monarch.aten "aten::mm"(%x, %w) on %s1 : (!monarch.tensor<4x4xf32, <gpu = 2>>, !monarch.tensor<4x4xf32, <gpu = 2>>) -> !monarch.tensor<4x4xf32, <gpu = 2>>
  return
}
