// REQUIRES: torch
// RUN: monarch-run %s > %t.out 2> %t.err
// RUN: /usr/bin/python3 %S/Inputs/check_matmul.py %t.out | FileCheck %s --check-prefix=TORCH
// RUN: FileCheck %s < %t.out

// A matmul of "random-looking" tensors on every rank of host=2 x gpu=2 (workers
// cannot be seeded, so the inputs are sin/cos of aranges, shifted by the rank),
// then reduced; Inputs/check_matmul.py recomputes every fetched value with
// single-process torch and compares (rtol = atol = 1e-4).

// TORCH: OK: 7 values match the torch reference

// CHECK:      fetch #{{[0-9]+}} rank 0 (host=0, gpu=0): tensor<8x10xf32> {{\[\[}}
// CHECK-NEXT: fetch #{{[0-9]+}} rank 1 (host=0, gpu=1): tensor<8x10xf32> {{\[\[}}
// CHECK-NEXT: fetch #{{[0-9]+}} rank 2 (host=1, gpu=0): tensor<8x10xf32> {{\[\[}}
// CHECK-NEXT: fetch #{{[0-9]+}} rank 3 (host=1, gpu=1): tensor<8x10xf32> {{\[\[}}
// CHECK-NEXT: fetch #{{[0-9]+}} rank 1 (host=0, gpu=1): tensor<8x10xf32> {{\[\[}}
// CHECK-NEXT: fetch #{{[0-9]+}} rank 2 (host=1, gpu=0): tensor<8x10xf32> {{\[\[}}
// CHECK-NEXT: fetch #{{[0-9]+}} rank 3 (host=1, gpu=1): tensor<8x10xf32> {{\[\[}}
// CHECK-NOT:  fetch

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 2>
  %r = monarch.rank %m (host, gpu) : !monarch.tensor<i64, <host = 2, gpu = 2>>

  // a = sin(arange(96).reshape(8, 12) * 0.37 + rank)
  %a0 = monarch.aten "aten::arange.start"(#monarch.scalar<0 : i64>, #monarch.scalar<96 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<96xf32, <host = 2, gpu = 2>>
  %a1 = monarch.aten "aten::reshape"(%a0, array<i64: 8, 12>) on %m : (!monarch.tensor<96xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<8x12xf32, <host = 2, gpu = 2>>
  %a2 = monarch.aten "aten::mul.Scalar"(%a1, #monarch.scalar<3.700000e-01 : f64>) on %m : (!monarch.tensor<8x12xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<8x12xf32, <host = 2, gpu = 2>>
  %a3 = monarch.aten "aten::add.Tensor"(%a2, %r, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<8x12xf32, <host = 2, gpu = 2>>, !monarch.tensor<i64, <host = 2, gpu = 2>>) -> !monarch.tensor<8x12xf32, <host = 2, gpu = 2>>
  %a = monarch.aten "aten::sin"(%a3) on %m : (!monarch.tensor<8x12xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<8x12xf32, <host = 2, gpu = 2>>

  // b = cos(arange(120).reshape(12, 10) * 0.11 - rank) * 1.5
  %b0 = monarch.aten "aten::arange.start"(#monarch.scalar<0 : i64>, #monarch.scalar<120 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<120xf32, <host = 2, gpu = 2>>
  %b1 = monarch.aten "aten::reshape"(%b0, array<i64: 12, 10>) on %m : (!monarch.tensor<120xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<12x10xf32, <host = 2, gpu = 2>>
  %b2 = monarch.aten "aten::mul.Scalar"(%b1, #monarch.scalar<1.100000e-01 : f64>) on %m : (!monarch.tensor<12x10xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<12x10xf32, <host = 2, gpu = 2>>
  %b3 = monarch.aten "aten::sub.Tensor"(%b2, %r, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<12x10xf32, <host = 2, gpu = 2>>, !monarch.tensor<i64, <host = 2, gpu = 2>>) -> !monarch.tensor<12x10xf32, <host = 2, gpu = 2>>
  %b4 = monarch.aten "aten::cos"(%b3) on %m : (!monarch.tensor<12x10xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<12x10xf32, <host = 2, gpu = 2>>
  %b = monarch.aten "aten::mul.Scalar"(%b4, #monarch.scalar<1.500000e+00 : f64>) on %m : (!monarch.tensor<12x10xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<12x10xf32, <host = 2, gpu = 2>>

  %c = monarch.aten "aten::matmul"(%a, %b) on %m : (!monarch.tensor<8x12xf32, <host = 2, gpu = 2>>, !monarch.tensor<12x10xf32, <host = 2, gpu = 2>>) -> !monarch.tensor<8x10xf32, <host = 2, gpu = 2>>
  %s = monarch.reduce %c (gpu) sum : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.tensor<8x10xf32, <host = 2, gpu = 2>>
  %avg = monarch.reduce %c () avg : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.tensor<8x10xf32, <host = 2, gpu = 2>>

  %f0 = monarch.fetch_shard %c at (host = 0, gpu = 0) : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.host<tensor<8x10xf32>>
  %f1 = monarch.fetch_shard %c at (host = 0, gpu = 1) : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.host<tensor<8x10xf32>>
  %f2 = monarch.fetch_shard %c at (host = 1, gpu = 0) : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.host<tensor<8x10xf32>>
  %f3 = monarch.fetch_shard %c at (host = 1, gpu = 1) : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.host<tensor<8x10xf32>>
  %f4 = monarch.fetch_shard %s at (gpu = 1) : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.host<tensor<8x10xf32>>
  %f5 = monarch.fetch_shard %s at (host = 1) : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.host<tensor<8x10xf32>>
  %f6 = monarch.fetch_shard %avg at (host = 1, gpu = 1) : !monarch.tensor<8x10xf32, <host = 2, gpu = 2>> -> !monarch.host<tensor<8x10xf32>>
  return
}
