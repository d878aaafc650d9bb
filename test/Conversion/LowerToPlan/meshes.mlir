// RUN: monarch-opt %s --monarch-emit-plan="format=text" -o /dev/null | FileCheck %s

// Every mesh value becomes its static view of the root (mesh#0); each
// distinct view used by an instruction is one plan mesh, whatever chain of
// view ops made it (resolved here, without --monarch-resolve-mesh-views).

// CHECK-LABEL: plan version 1
// CHECK-NEXT: root (host = 4, gpu = 6)
// CHECK-NEXT: mesh#1 = offset 0 (dp = 2:12, pp = 2:6, tp = 6:1)
// CHECK-NEXT: mesh#2 = offset 6 (dp = 2:12, tp = 6:1)
// CHECK-NEXT: mesh#3 = offset 1 (h = 4:6, g = 3:2)
// CHECK-NEXT: mesh#4 = offset 0 (ranks = 24:1)
// Dim names matter (rank and reduce name dims): a renamed root is a mesh.
// CHECK-NEXT: mesh#5 = offset 0 (x = 4:6, y = 6:1)
// CHECK-NEXT: %{{[0-9]+}} = rank (host) on mesh#0
// CHECK: %{{[0-9]+}} = rank (tp) on mesh#1
// CHECK: %{{[0-9]+}} = rank (dp) on mesh#2
// Same layout as %pp1 through another chain: the same plan mesh.
// CHECK: %{{[0-9]+}} = rank (dp) on mesh#2
// CHECK: %{{[0-9]+}} = rank (g) on mesh#3
// CHECK: %{{[0-9]+}} = rank (ranks) on mesh#4
// CHECK: %{{[0-9]+}} = rank (x, y) on mesh#5
// A view equal to the root is the root.
// CHECK: %{{[0-9]+}} = rank (gpu) on mesh#0
func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 4, gpu = 6>
  %r = monarch.rank %m (host) : !monarch.tensor<i64, <host = 4, gpu = 6>>
  %s = monarch.split %m (host -> [dp, pp], gpu -> [tp], pp = 2) : !monarch.mesh<host = 4, gpu = 6>
  %r0 = monarch.rank %s (tp) : !monarch.tensor<i64, <dp = 2, pp = 2, tp = 6>>
  %pp1 = monarch.slice %s (pp = 1) : !monarch.mesh<dp = 2, pp = 2, tp = 6>
  %r1 = monarch.rank %pp1 (dp) : !monarch.tensor<i64, <dp = 2, tp = 6>>
  %v = monarch.view %m offset 6 (dp = 2:12, tp = 6:1) : !monarch.mesh<host = 4, gpu = 6>
  %r2 = monarch.rank %v (dp) : !monarch.tensor<i64, <dp = 2, tp = 6>>
  %n = monarch.rename %m (host -> h, gpu -> g) : !monarch.mesh<host = 4, gpu = 6>
  %odd = monarch.slice %n (g = 1::2) : !monarch.mesh<h = 4, g = 6>
  %r3 = monarch.rank %odd (g) : !monarch.tensor<i64, <h = 4, g = 3>>
  %f = monarch.flatten %m -> ranks : !monarch.mesh<host = 4, gpu = 6>
  %r4 = monarch.rank %f (ranks) : !monarch.tensor<i64, <ranks = 24>>
  %same = monarch.rename %m (host -> x, gpu -> y) : !monarch.mesh<host = 4, gpu = 6>
  %back = monarch.view %m offset 0 (x = 4:6, y = 6:1) : !monarch.mesh<host = 4, gpu = 6>
  %r5 = monarch.rank %back (x, y) : !monarch.tensor<i64, <x = 4, y = 6>>
  %all = monarch.view %m offset 0 (host = 4:6, gpu = 6:1) : !monarch.mesh<host = 4, gpu = 6>
  %r6 = monarch.rank %all (gpu) : !monarch.tensor<i64, <host = 4, gpu = 6>>
  return
}
