func.func @f(%m: !monarch.mesh<gpu = 4>) -> !monarch.tensor<4xf32, <gpu = 4>> {
  %t = monarch.aten "aten::full"(array<i64: 4>, #monarch.scalar<1.5 : f64>, #monarch.dtype<float32>, #monarch.layout<strided>, #monarch.device<"cpu">, #monarch.none) on %m : () -> !monarch.tensor<4xf32, <gpu = 4>>
  %u = monarch.aten "aten::cat"([%t, %t], 0 : i64) on %m : (!monarch.tensor<4xf32, <gpu = 4>>, !monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<8xf32, <gpu = 4>>
  %i = monarch.aten "aten::index.Tensor"(%u, [#monarch.none, %t]) on %m : (!monarch.tensor<8xf32, <gpu = 4>>, !monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  %c = monarch.aten "aten::clone"(%t, #monarch.memory_format<contiguous_format>) on %m : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  %k = monarch.rank %m (gpu) : !monarch.tensor<i64, <gpu = 4>>
  %y = monarch.call_function "pkg.fn"(%t, true) on %m : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  return %y : !monarch.tensor<4xf32, <gpu = 4>>
}
