func.func @f(%t: !monarch.tensor<4x2xf32, <host = 2, gpu = 4>>, %d: !monarch.mesh<gpu = 4>) {
  %0 = monarch.reduce %t (gpu) sum scatter : !monarch.tensor<4x2xf32, <host = 2, gpu = 4>> -> !monarch.tensor<2xf32, <host = 2, gpu = 4>>
  %1 = monarch.reduce %t () max inplace : !monarch.tensor<4x2xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4x2xf32, <host = 2, gpu = 4>>
  %2 = monarch.reduce_start %t (host) stack : !monarch.tensor<4x2xf32, <host = 2, gpu = 4>> -> !monarch.async<!monarch.tensor<2x4x2xf32, <host = 2, gpu = 4>>>
  %3 = monarch.wait %2 : !monarch.async<!monarch.tensor<2x4x2xf32, <host = 2, gpu = 4>>>
  %4 = monarch.slice_mesh %t (host = 1) : !monarch.tensor<4x2xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4x2xf32, <gpu = 4>>
  %5 = monarch.to_mesh %4 to %d : !monarch.tensor<4x2xf32, <gpu = 4>> -> !monarch.tensor<4x2xf32, <gpu = 4>>
  %6 = monarch.fetch_shard %t at (gpu = 2) : !monarch.tensor<4x2xf32, <host = 2, gpu = 4>> -> !monarch.host<tensor<4x2xf32>>
  return
}
