// A DDP training job of TRIPS steps (loop-plan-size.test substitutes the
// number): the step of ddp.mlir in a loop, its batch made from the step
// number (make_batch(step): x = rand * (1 + step / 1000)) and its learning
// rate a schedule of it (lr = 0.01 / (1 + step)), the loss fetched each step.

!T = !monarch.tensor<64x64xf32, <dp = 4>>
!L = !monarch.tensor<f32, <dp = 4>>
!I = !monarch.tensor<i64, <dp = 4>>

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %trips = arith.constant TRIPS : index
  %m = monarch.spawn_procs : !monarch.mesh<dp = 4>
  %x0 = monarch.aten "aten::rand"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %w1 = monarch.aten "aten::rand"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %w2 = monarch.aten "aten::rand"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %w3 = monarch.aten "aten::rand"(array<i64: 64, 64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  scf.for %i = %c0 to %trips step %c1 {
    %step = monarch.index_tensor %i on %m : !I
    %sc = monarch.aten "aten::div.Scalar"(%step, #monarch.scalar<1000 : i64>) on %m : (!I) -> !L
    %scale = monarch.aten "aten::add.Scalar"(%sc, #monarch.scalar<1 : i64>, #monarch.scalar<1 : i64>) on %m : (!L) -> !L
    %x = monarch.aten "aten::mul.Tensor"(%x0, %scale) on %m : (!T, !L) -> !T
    %s1 = monarch.aten "aten::add.Scalar"(%step, #monarch.scalar<1 : i64>, #monarch.scalar<1 : i64>) on %m : (!I) -> !I
    %inv = monarch.aten "aten::reciprocal"(%s1) on %m : (!I) -> !L
    %lr = monarch.aten "aten::mul.Scalar"(%inv, #monarch.scalar<1.000000e-02 : f64>) on %m : (!L) -> !L
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
    %r3 = monarch.reduce %g3 (dp) avg inplace : !T -> !T
    %u3 = monarch.aten "aten::mul.Tensor"(%r3, %lr) on %m : (!T, !L) -> !T
    %n3 = monarch.aten "aten::sub_.Tensor"(%w3, %u3, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
    %dh2 = monarch.aten "aten::threshold_backward"(%da2, %h2, #monarch.scalar<0 : i64>) on %m : (!T, !T) -> !T
    %a1t = monarch.aten "aten::t"(%a1) on %m : (!T) -> !T
    %g2 = monarch.aten "aten::mm"(%a1t, %dh2) on %m : (!T, !T) -> !T
    %w2t = monarch.aten "aten::t"(%w2) on %m : (!T) -> !T
    %da1 = monarch.aten "aten::mm"(%dh2, %w2t) on %m : (!T, !T) -> !T
    %r2 = monarch.reduce %g2 (dp) avg inplace : !T -> !T
    %u2 = monarch.aten "aten::mul.Tensor"(%r2, %lr) on %m : (!T, !L) -> !T
    %n2 = monarch.aten "aten::sub_.Tensor"(%w2, %u2, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
    %dh1 = monarch.aten "aten::threshold_backward"(%da1, %h1, #monarch.scalar<0 : i64>) on %m : (!T, !T) -> !T
    %xt = monarch.aten "aten::t"(%x) on %m : (!T) -> !T
    %g1 = monarch.aten "aten::mm"(%xt, %dh1) on %m : (!T, !T) -> !T
    %r1 = monarch.reduce %g1 (dp) avg inplace : !T -> !T
    %u1 = monarch.aten "aten::mul.Tensor"(%r1, %lr) on %m : (!T, !L) -> !T
    %n1 = monarch.aten "aten::sub_.Tensor"(%w1, %u1, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
    %v = monarch.fetch_shard %loss at (dp = 1) : !L -> !monarch.host<tensor<f32>>
  }
  return
}
