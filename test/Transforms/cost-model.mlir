// RUN: monarch-opt %s --monarch-print-cost="profile=%S/Inputs/profile.json" --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s
// RUN: monarch-opt %s --monarch-print-cost=device=cpu --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not monarch-opt %s --monarch-print-cost="profile=%S/Inputs/bad-profile.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not monarch-opt %s --monarch-print-cost="profile=%S/Inputs/missing.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING

// BAD: error: cost profile: all_reduce.bytes_per_s must be positive
// MISSING: error: cost profile: cannot read '{{.*}}missing.json'

// The profile: 1 GFLOP/s, 1 TB/s memory, no launch overhead; all-reduce at
// 1 GB/s; the "host" dim at 100 MB/s.

func.func @costs(%m: !monarch.mesh<host = 2, dp = 4>,
                 %a: !monarch.tensor<10x20xf32, <host = 2, dp = 4>>,
                 %b: !monarch.tensor<20x30xf32, <host = 2, dp = 4>>,
                 %bias: !monarch.tensor<10x30xf32, <host = 2, dp = 4>>,
                 %v: !monarch.tensor<1000xf32, <host = 2, dp = 4>>,
                 %h: !monarch.tensor<1000xf16, <host = 2, dp = 4>>) {
  // mm: 2*M*N*K = 2*10*30*20 = 12000 FLOPs; bytes 800 + 2400 + 1200.
  // CHECK: :[[@LINE+2]]:{{[0-9]+}}: remark: compute: flops=12000 bytes=4400 time=12.000us
  // CPU: remark: compute: flops=12000 bytes=4400 time=2.220us
  %c = monarch.aten "aten::mm"(%a, %b) on %m : (!monarch.tensor<10x20xf32, <host = 2, dp = 4>>, !monarch.tensor<20x30xf32, <host = 2, dp = 4>>) -> !monarch.tensor<10x30xf32, <host = 2, dp = 4>>
  // addmm: the product plus the bias.
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: compute: flops=12300 bytes=5600 time=12.300us
  %d = monarch.aten "aten::addmm"(%bias, %a, %b, #monarch.scalar<1 : i64>, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<10x30xf32, <host = 2, dp = 4>>, !monarch.tensor<10x20xf32, <host = 2, dp = 4>>, !monarch.tensor<20x30xf32, <host = 2, dp = 4>>) -> !monarch.tensor<10x30xf32, <host = 2, dp = 4>>
  // Elementwise: one FLOP per element; f16 is 2 bytes.
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: compute: flops=1000 bytes=4000 time=1.000us
  %e = monarch.aten "aten::neg"(%h) on %m : (!monarch.tensor<1000xf16, <host = 2, dp = 4>>) -> !monarch.tensor<1000xf16, <host = 2, dp = 4>>
  // In-place: bytes of the operands and the aliasing result.
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: compute: flops=1000 bytes=12000 time=1.000us
  %f = monarch.aten "aten::add_.Tensor"(%v, %v, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<1000xf32, <host = 2, dp = 4>>, !monarch.tensor<1000xf32, <host = 2, dp = 4>>) -> !monarch.tensor<1000xf32, <host = 2, dp = 4>>
  // Reductions read every input element.
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: compute: flops=1000 bytes=4004 time=1.000us
  %s = monarch.aten "aten::sum"(%v, #monarch.none) on %m : (!monarch.tensor<1000xf32, <host = 2, dp = 4>>) -> !monarch.tensor<f32, <host = 2, dp = 4>>
  // Ring all-reduce over dp (N=4): 2*(N-1)/N * 4000 bytes at 1 GB/s.
  // CHECK: :[[@LINE+2]]:{{[0-9]+}}: remark: all_reduce over 4 ranks: bytes=4000 time=6.000us
  // CPU: remark: all_reduce over 4 ranks: bytes=4000 time=306.800us
  %r = monarch.reduce %v (dp) sum : !monarch.tensor<1000xf32, <host = 2, dp = 4>> -> !monarch.tensor<1000xf32, <host = 2, dp = 4>>
  // Over host (N=2) the slower link applies: 2*(1/2)*4000 bytes at 100 MB/s.
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: all_reduce over 2 ranks: bytes=4000 time=40.000us
  %rh = monarch.reduce %v (host) sum : !monarch.tensor<1000xf32, <host = 2, dp = 4>> -> !monarch.tensor<1000xf32, <host = 2, dp = 4>>
  // All-gather of the stacked output (4*4000 bytes): 3 alphas + 3/4*16000 bytes.
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: all_gather over 4 ranks: bytes=16000 time=15.000us
  %g = monarch.reduce %v (dp) stack : !monarch.tensor<1000xf32, <host = 2, dp = 4>> -> !monarch.tensor<4x1000xf32, <host = 2, dp = 4>>
  // The async form costs the same as the reduce; its wait costs nothing.
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: all_reduce over 8 ranks: bytes=4000 time=70.000us
  %t = monarch.reduce_start %v () sum : !monarch.tensor<1000xf32, <host = 2, dp = 4>> -> !monarch.async<!monarch.tensor<1000xf32, <host = 2, dp = 4>>>
  // CHECK-NOT: remark
  %w = monarch.wait %t : !monarch.async<!monarch.tensor<1000xf32, <host = 2, dp = 4>>>
  return
}
