// RUN: monarch-opt %s --monarch-resolve-mesh-views --split-input-file | FileCheck %s

// Every view, chained or not, becomes one monarch.view of its root.
// CHECK-LABEL: func.func @all_views
// CHECK-SAME: (%[[ROOT:.*]]: !monarch.mesh<host = 60, gpu = 24>)
func.func @all_views(%m: !monarch.mesh<host = 60, gpu = 24>)
    -> (!monarch.mesh<dp = 15, pp = 4, tp = 24>, !monarch.mesh<dp = 15, tp = 24>, !monarch.mesh<all = 1440>, !monarch.mesh<h = 60, gpu = 24>) {
  // CHECK-DAG: %[[SPLIT:.*]] = monarch.view %[[ROOT]] offset 0 (dp = 15:96, pp = 4:24, tp = 24:1)
  %v = monarch.split %m (host -> [dp, pp], gpu -> [tp], pp = 4) : !monarch.mesh<host = 60, gpu = 24>
  // CHECK-DAG: %[[SLICE:.*]] = monarch.view %[[ROOT]] offset 24 (dp = 15:96, tp = 24:1)
  %s = monarch.slice %v (pp = 1) : !monarch.mesh<dp = 15, pp = 4, tp = 24>
  // CHECK-DAG: %[[FLAT:.*]] = monarch.view %[[ROOT]] offset 0 (all = 1440:1)
  %f = monarch.flatten %m -> all : !monarch.mesh<host = 60, gpu = 24>
  // CHECK-DAG: %[[REN:.*]] = monarch.view %[[ROOT]] offset 0 (h = 60:24, gpu = 24:1)
  %r = monarch.rename %m (host -> h) : !monarch.mesh<host = 60, gpu = 24>
  // CHECK-NOT: monarch.split
  // CHECK-NOT: monarch.slice
  // CHECK: return %[[SPLIT]], %[[SLICE]], %[[FLAT]], %[[REN]]
  return %v, %s, %f, %r : !monarch.mesh<dp = 15, pp = 4, tp = 24>, !monarch.mesh<dp = 15, tp = 24>, !monarch.mesh<all = 1440>, !monarch.mesh<h = 60, gpu = 24>
}

// -----

// Views inside a loop body resolve against the root defined outside.
// CHECK-LABEL: func.func @in_loop
func.func @in_loop(%lb: index, %ub: index, %st: index) {
  // CHECK: %[[M:.*]] = monarch.spawn_procs
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: scf.for
  scf.for %i = %lb to %ub step %st {
    %s = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
    %g = monarch.slice %s (gpu = 2:4) : !monarch.mesh<gpu = 4>
    // CHECK: %[[V:.*]] = monarch.view %[[M]] offset 6 (gpu = 2:1)
    // CHECK: %[[K:.*]] = monarch.rank %[[V]] (gpu)
    %k = monarch.rank %g (gpu) : !monarch.tensor<i64, <gpu = 2>>
    // CHECK: monarch.aten "aten::_print"(%[[K]]) on %[[V]]
    monarch.aten "aten::_print"(%k) on %g : (!monarch.tensor<i64, <gpu = 2>>) -> ()
  }
  return
}
