// One DDP training step written the naive way, as the Python frontend traces
//
//   for p, g in zip(params, monarch.grad_generator(loss, params)):
//       g.reduce_("dp", "sum")          # all-reduce the gradient over "dp"
//       p.sub_(lr * g)                  # SGD update
//
// forward (three 64x64 layers), then per layer the gradient, its in-place
// all-reduce and the parameter update. `monarch-opt --monarch-default-pipeline`
// turns it into the hand-overlapped schedule of Monarch's docs: every
// all-reduce on a "comm" stream, started as soon as its gradient exists, and
// waited for just before its parameter's update. `scripts/demo.sh` shows the
// simulator's step time before and after.
!T = !monarch.tensor<64x64xf32, <dp = 4>>
!L = !monarch.tensor<f32, <dp = 4>>

func.func @ddp_step(%m: !monarch.mesh<dp = 4>, %x: !T, %w1: !T, %w2: !T, %w3: !T) -> !L {

  %h1 = monarch.aten "aten::mm"(%x, %w1) on %m : (!T, !T) -> !T
  %a1 = monarch.aten "aten::relu"(%h1) on %m : (!T) -> !T
  %h2 = monarch.aten "aten::mm"(%a1, %w2) on %m : (!T, !T) -> !T
  %a2 = monarch.aten "aten::relu"(%h2) on %m : (!T) -> !T
  %h3 = monarch.aten "aten::mm"(%a2, %w3) on %m : (!T, !T) -> !T
  %loss = monarch.aten "aten::sum"(%h3, #monarch.none) on %m : (!T) -> !L
  %d3 = monarch.aten "aten::ones_like"(%h3, #monarch.none, #monarch.none, #monarch.none, #monarch.none, #monarch.none) on %m : (!T) -> !T
  %a2t = monarch.aten "aten::t"(%a2) on %m : (!T) -> !T
  %g3 = monarch.aten "aten::mm"(%a2t, %d3) on %m : (!T, !T) -> !T
  %w3t = monarch.aten "aten::t"(%w3) on %m : (!T) -> !T
  %da2 = monarch.aten "aten::mm"(%d3, %w3t) on %m : (!T, !T) -> !T
  %r3 = monarch.reduce %g3 (dp) sum inplace : !T -> !T
  %u3 = monarch.aten "aten::sub_.Tensor"(%w3, %r3, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  %dh2 = monarch.aten "aten::threshold_backward"(%da2, %h2, #monarch.scalar<0 : i64>) on %m : (!T, !T) -> !T
  %a1t = monarch.aten "aten::t"(%a1) on %m : (!T) -> !T
  %g2 = monarch.aten "aten::mm"(%a1t, %dh2) on %m : (!T, !T) -> !T
  %w2t = monarch.aten "aten::t"(%w2) on %m : (!T) -> !T
  %da1 = monarch.aten "aten::mm"(%dh2, %w2t) on %m : (!T, !T) -> !T
  %r2 = monarch.reduce %g2 (dp) sum inplace : !T -> !T
  %u2 = monarch.aten "aten::sub_.Tensor"(%w2, %r2, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  %dh1 = monarch.aten "aten::threshold_backward"(%da1, %h1, #monarch.scalar<0 : i64>) on %m : (!T, !T) -> !T
  %xt = monarch.aten "aten::t"(%x) on %m : (!T) -> !T
  %g1 = monarch.aten "aten::mm"(%xt, %dh1) on %m : (!T, !T) -> !T
  %r1 = monarch.reduce %g1 (dp) sum inplace : !T -> !T
  %u1 = monarch.aten "aten::sub_.Tensor"(%w1, %r1, #monarch.scalar<1.000000e-02 : f64>) on %m : (!T, !T) -> !T
  return %loss : !L
}
