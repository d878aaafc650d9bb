func.func @f(%m: !monarch.mesh<gpu = 2>, %t: !monarch.tensor<4xf32, <gpu = 2>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  %t2, %b = monarch.borrow %t to %s mutable : !monarch.tensor<4xf32, <gpu = 2>> -> !monarch.tensor<4xf32, <gpu = 2>, stream = "comm">
  monarch.borrow_first_use %b
  monarch.borrow_last_use %b
  monarch.borrow_drop %b
  %a = monarch.spawn_actor "t" on %m : !monarch.actor<"T", <gpu = 2>>
  %g = monarch.endpoint_call %a "grad" rref(%t) : !monarch.actor<"T", <gpu = 2>>, (!monarch.tensor<4xf32, <gpu = 2>>) -> !monarch.tensor<4xf32, <gpu = 2>>
  %v = monarch.endpoint_call %a "v" choose() : !monarch.actor<"T", <gpu = 2>>, () -> !monarch.host<i64>
  return
}
