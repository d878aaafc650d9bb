// RUN: monarch-run %s > %t.out
// RUN: FileCheck %s < %t.out
// RUN: monarch-run %s --no-optimize | FileCheck %s

// Every reduce variant of DESIGN.md §6.2 on host=2 x gpu=2, with exact values.
// Rank r = 2*host + gpu holds x_r = arange(4).reshape(2, 2) + 10*(r + 1):
//   r0 = [[10, 11], [12, 13]]   r1 = [[20, 21], [22, 23]]
//   r2 = [[30, 31], [32, 33]]   r3 = [[40, 41], [42, 43]]
// The gpu groups are {r0, r1} and {r2, r3}, the host groups {r0, r2} and {r1, r3}.
// The first run goes through the default pipeline (reduces become async
// start/wait pairs), the second with --no-optimize: same values.

!T = !monarch.tensor<2x2xf32, <host = 2, gpu = 2>>
!R = !monarch.tensor<2xf32, <host = 2, gpu = 2>>
!S = !monarch.tensor<2x2x2xf32, <host = 2, gpu = 2>>
!I = !monarch.tensor<i64, <host = 2, gpu = 2>>
!H = !monarch.host<tensor<2x2xf32>>
!HR = !monarch.host<tensor<2xf32>>
!HS = !monarch.host<tensor<2x2x2xf32>>

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 2>
  %r = monarch.rank %m (host, gpu) : !I
  %r1 = monarch.aten "aten::add.Scalar"(%r, #monarch.scalar<1 : i64>, #monarch.scalar<1 : i64>) on %m : (!I) -> !I
  %a = monarch.aten "aten::arange.start"(#monarch.scalar<0 : i64>, #monarch.scalar<4 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<4xf32, <host = 2, gpu = 2>>
  %a2 = monarch.aten "aten::reshape"(%a, array<i64: 2, 2>) on %m : (!monarch.tensor<4xf32, <host = 2, gpu = 2>>) -> !T
  %x = monarch.aten "aten::add.Tensor"(%a2, %r1, #monarch.scalar<10 : i64>) on %m : (!T, !I) -> !T

  // CHECK:      rank 0 (host=0, gpu=0): tensor<2x2xf32> {{\[\[}}10, 11], [12, 13]]
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<2x2xf32> {{\[\[}}40, 41], [42, 43]]
  %f0 = monarch.fetch_shard %x : !T -> !H
  %f1 = monarch.fetch_shard %x at (host = 1, gpu = 1) : !T -> !H

  // sum over gpu (all-reduce).
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<2x2xf32> {{\[\[}}30, 32], [34, 36]]
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<2x2xf32> {{\[\[}}70, 72], [74, 76]]
  %sum = monarch.reduce %x (gpu) sum : !T -> !T
  %f2 = monarch.fetch_shard %sum at (gpu = 1) : !T -> !H
  %f3 = monarch.fetch_shard %sum at (host = 1) : !T -> !H

  // avg over host.
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<2x2xf32> {{\[\[}}20, 21], [22, 23]]
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<2x2xf32> {{\[\[}}30, 31], [32, 33]]
  %avg = monarch.reduce %x (host) avg : !T -> !T
  %f4 = monarch.fetch_shard %avg at (host = 1) : !T -> !H
  %f5 = monarch.fetch_shard %avg at (gpu = 1) : !T -> !H

  // min over () = every dim; max over (host, gpu).
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<2x2xf32> {{\[\[}}10, 11], [12, 13]]
  // CHECK-NEXT: rank 0 (host=0, gpu=0): tensor<2x2xf32> {{\[\[}}40, 41], [42, 43]]
  %min = monarch.reduce %x () min : !T -> !T
  %max = monarch.reduce %x (host, gpu) max : !T -> !T
  %f6 = monarch.fetch_shard %min at (host = 1, gpu = 1) : !T -> !H
  %f7 = monarch.fetch_shard %max : !T -> !H

  // product over gpu, and over everything.
  // CHECK-NEXT: rank 0 (host=0, gpu=0): tensor<2x2xf32> {{\[\[}}200, 231], [264, 299]]
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<2x2xf32> {{\[\[}}1200, 1271], [1344, 1419]]
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<2x2xf32> {{\[\[}}240000, 293601], [354816, 424281]]
  %pg = monarch.reduce %x (gpu) product : !T -> !T
  %pa = monarch.reduce %x () product : !T -> !T
  %f8 = monarch.fetch_shard %pg : !T -> !H
  %f9 = monarch.fetch_shard %pg at (host = 1, gpu = 1) : !T -> !H
  %f10 = monarch.fetch_shard %pa at (host = 1) : !T -> !H

  // sum scatter over gpu (reduce-scatter): gpu g gets row g of the group's sum.
  // CHECK-NEXT: rank 0 (host=0, gpu=0): tensor<2xf32> [30, 32]
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<2xf32> [34, 36]
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<2xf32> [74, 76]
  %ss = monarch.reduce %x (gpu) sum scatter : !T -> !R
  %f11 = monarch.fetch_shard %ss : !R -> !HR
  %f12 = monarch.fetch_shard %ss at (gpu = 1) : !R -> !HR
  %f13 = monarch.fetch_shard %ss at (host = 1, gpu = 1) : !R -> !HR

  // avg scatter over host: host h gets row h of its host group's average.
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<2xf32> [22, 23]
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<2xf32> [30, 31]
  %as = monarch.reduce %x (host) avg scatter : !T -> !R
  %f14 = monarch.fetch_shard %as at (host = 1) : !R -> !HR
  %f15 = monarch.fetch_shard %as at (gpu = 1) : !R -> !HR

  // min and max scatter over gpu.
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<2xf32> [12, 13]
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<2xf32> [40, 41]
  %mins = monarch.reduce %x (gpu) min scatter : !T -> !R
  %maxs = monarch.reduce %x (gpu) max scatter : !T -> !R
  %f16 = monarch.fetch_shard %mins at (gpu = 1) : !R -> !HR
  %f17 = monarch.fetch_shard %maxs at (host = 1) : !R -> !HR

  // stack over host and over gpu (all-gather): [N, *shape] in group order.
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<2x2x2xf32> {{\[\[\[}}20, 21], [22, 23]], {{\[\[}}40, 41], [42, 43]]]
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<2x2x2xf32> {{\[\[\[}}30, 31], [32, 33]], {{\[\[}}40, 41], [42, 43]]]
  %sh = monarch.reduce %x (host) stack : !T -> !S
  %sg = monarch.reduce %x (gpu) stack : !T -> !S
  %f18 = monarch.fetch_shard %sh at (gpu = 1) : !S -> !HS
  %f19 = monarch.fetch_shard %sg at (host = 1) : !S -> !HS

  // stack scatter over gpu (all-to-all): row j of every member goes to gpu j.
  // CHECK-NEXT: rank 0 (host=0, gpu=0): tensor<2x2xf32> {{\[\[}}10, 11], [20, 21]]
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<2x2xf32> {{\[\[}}12, 13], [22, 23]]
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<2x2xf32> {{\[\[}}32, 33], [42, 43]]
  %a2a = monarch.reduce %x (gpu) stack scatter : !T -> !T
  %f20 = monarch.fetch_shard %a2a : !T -> !H
  %f21 = monarch.fetch_shard %a2a at (gpu = 1) : !T -> !H
  %f22 = monarch.fetch_shard %a2a at (host = 1, gpu = 1) : !T -> !H

  // In place: the clone becomes the max over gpu; x itself is unchanged.
  // CHECK-NEXT: rank 0 (host=0, gpu=0): tensor<2x2xf32> {{\[\[}}20, 21], [22, 23]]
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<2x2xf32> {{\[\[}}40, 41], [42, 43]]
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<2x2xf32> {{\[\[}}30, 31], [32, 33]]
  %y = monarch.aten "aten::clone"(%x, #monarch.none) on %m : (!T) -> !T
  %yi = monarch.reduce %y (gpu) max inplace : !T -> !T
  %f23 = monarch.fetch_shard %y : !T -> !H
  %f24 = monarch.fetch_shard %y at (host = 1) : !T -> !H
  %f25 = monarch.fetch_shard %x at (host = 1) : !T -> !H

  // In place over everything: sum () of the clone.
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<2x2xf32> {{\[\[}}100, 104], [108, 112]]
  %z = monarch.aten "aten::clone"(%x, #monarch.none) on %m : (!T) -> !T
  %zi = monarch.reduce %z () sum inplace : !T -> !T
  %f26 = monarch.fetch_shard %zi at (host = 1, gpu = 1) : !T -> !H

  // into an existing tensor (out=): sum over host.
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<2x2xf32> {{\[\[}}60, 62], [64, 66]]
  %o = monarch.aten "aten::zeros"(array<i64: 2, 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %so = monarch.reduce %x (host) sum into %o : !T, !T -> !T
  %f27 = monarch.fetch_shard %o at (gpu = 1) : !T -> !H

  // Integer avg truncates: ranks 0..3 as int64.
  // CHECK-NEXT: rank 0 (host=0, gpu=0): tensor<i64> 0
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<i64> 2
  // CHECK-NEXT: rank 1 (host=0, gpu=1): tensor<i64> 1
  %ia = monarch.reduce %r (gpu) avg : !I -> !I
  %iall = monarch.reduce %r () avg : !I -> !I
  %f28 = monarch.fetch_shard %ia : !I -> !monarch.host<tensor<i64>>
  %f29 = monarch.fetch_shard %ia at (host = 1, gpu = 1) : !I -> !monarch.host<tensor<i64>>
  %f30 = monarch.fetch_shard %iall at (gpu = 1) : !I -> !monarch.host<tensor<i64>>

  // On a 1-d slice (host = 1), () is the one dim gpu: stack () is allowed there.
  // Slice ranks hold arange(2) + 100*gpu.
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<2x2xf32> {{\[\[}}0, 1], [100, 101]]
  // sum scatter () on the slice: [0, 1] + [100, 101], element g to gpu g.
  // CHECK-NEXT: rank 2 (host=1, gpu=0): tensor<f32> 100
  // CHECK-NEXT: rank 3 (host=1, gpu=1): tensor<f32> 102
  %h1 = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 2>
  %g = monarch.rank %h1 (gpu) : !monarch.tensor<i64, <gpu = 2>>
  %b = monarch.aten "aten::arange.start"(#monarch.scalar<0 : i64>, #monarch.scalar<2 : i64>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %h1 : () -> !monarch.tensor<2xf32, <gpu = 2>>
  %bg = monarch.aten "aten::add.Tensor"(%b, %g, #monarch.scalar<100 : i64>) on %h1 : (!monarch.tensor<2xf32, <gpu = 2>>, !monarch.tensor<i64, <gpu = 2>>) -> !monarch.tensor<2xf32, <gpu = 2>>
  %bs = monarch.reduce %bg () stack : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.tensor<2x2xf32, <gpu = 2>>
  %bsc = monarch.reduce %bg () sum scatter : !monarch.tensor<2xf32, <gpu = 2>> -> !monarch.tensor<f32, <gpu = 2>>
  %f31 = monarch.fetch_shard %bs at (gpu = 1) : !monarch.tensor<2x2xf32, <gpu = 2>> -> !monarch.host<tensor<2x2xf32>>
  %f32 = monarch.fetch_shard %bsc at (gpu = 0) : !monarch.tensor<f32, <gpu = 2>> -> !monarch.host<tensor<f32>>
  %f33 = monarch.fetch_shard %bsc at (gpu = 1) : !monarch.tensor<f32, <gpu = 2>> -> !monarch.host<tensor<f32>>
  return
}
// CHECK-NOT: fetch
