// A two-stage pipeline forward, as the seed's pipeline example writes it in
// Python:
//
//   mesh = this_host().spawn_procs({"host": 2, "gpu": 2})
//   pipeline = mesh.rename(host="pp")
//   stages = [pipeline.slice(pp=i) for i in range(2)]
//   with stages[0].activate():  x = torch.relu(torch.rand(4, 4) @ w0)
//   x = x.to_mesh(stages[1])
//   with stages[1].activate():  y = torch.relu(x @ w1).reduce("gpu", "sum")
//   monarch.inspect(y, gpu=1)
//
// `scripts/demo.sh` shows what the compiler makes of it.
func.func @pipeline_forward() -> !monarch.host<tensor<4x4xf32>> {
  %mesh = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 2>
  %pipe = monarch.rename %mesh (host -> pp) : !monarch.mesh<host = 2, gpu = 2>
  %s0 = monarch.slice %pipe (pp = 0) : !monarch.mesh<pp = 2, gpu = 2>
  %s1 = monarch.slice %pipe (pp = 1) : !monarch.mesh<pp = 2, gpu = 2>

  // Stage 0.
  %x = monarch.aten "aten::rand"(array<i64: 4, 4>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %s0 : () -> !monarch.tensor<4x4xf32, <gpu = 2>>
  %w0 = monarch.aten "aten::rand"(array<i64: 4, 4>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %s0 : () -> !monarch.tensor<4x4xf32, <gpu = 2>>
  %h0 = monarch.aten "aten::mm"(%x, %w0) on %s0 : (!monarch.tensor<4x4xf32, <gpu = 2>>, !monarch.tensor<4x4xf32, <gpu = 2>>) -> !monarch.tensor<4x4xf32, <gpu = 2>>
  %a0 = monarch.aten "aten::relu"(%h0) on %s0 : (!monarch.tensor<4x4xf32, <gpu = 2>>) -> !monarch.tensor<4x4xf32, <gpu = 2>>

  // Activations move to stage 1.
  %a0s1 = monarch.to_mesh %a0 to %s1 : !monarch.tensor<4x4xf32, <gpu = 2>> -> !monarch.tensor<4x4xf32, <gpu = 2>>

  // Stage 1.
  %w1 = monarch.aten "aten::rand"(array<i64: 4, 4>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %s1 : () -> !monarch.tensor<4x4xf32, <gpu = 2>>
  %h1 = monarch.aten "aten::mm"(%a0s1, %w1) on %s1 : (!monarch.tensor<4x4xf32, <gpu = 2>>, !monarch.tensor<4x4xf32, <gpu = 2>>) -> !monarch.tensor<4x4xf32, <gpu = 2>>
  %a1 = monarch.aten "aten::relu"(%h1) on %s1 : (!monarch.tensor<4x4xf32, <gpu = 2>>) -> !monarch.tensor<4x4xf32, <gpu = 2>>
  %y = monarch.reduce %a1 (gpu) sum : !monarch.tensor<4x4xf32, <gpu = 2>> -> !monarch.tensor<4x4xf32, <gpu = 2>>

  %v = monarch.inspect %y at (gpu = 1) : !monarch.tensor<4x4xf32, <gpu = 2>> -> !monarch.host<tensor<4x4xf32>>
  return %v : !monarch.host<tensor<4x4xf32>>
}
