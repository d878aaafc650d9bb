// A borrow error (DESIGN.md §6.4): the borrowed tensor is used after its drop.
func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %s = monarch.stream_create : !monarch.stream<"comm">
  %t = monarch.aten "aten::ones"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.device<"cuda">, #monarch.none) on %m : () -> !monarch.tensor<4xf32, <gpu = 2>>
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 2>> -> !monarch.tensor<4xf32, <gpu = 2>, stream = "comm">
  monarch.borrow_drop %b
  %r = monarch.reduce %t2 (gpu) sum : !monarch.tensor<4xf32, <gpu = 2>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 2>, stream = "comm">
  %v = monarch.inspect %r : !monarch.tensor<4xf32, <gpu = 2>, stream = "comm"> -> !monarch.host<tensor<4xf32>>
  return
}
