// RUN: monarch-opt %s --canonicalize --split-input-file | FileCheck %s

// A chain of views folds into one monarch.view of the root.
// CHECK-LABEL: func.func @chain
func.func @chain() -> !monarch.mesh<x = 4> {
  // CHECK: %[[M:.*]] = monarch.spawn_procs : !monarch.mesh<host = 60, gpu = 24>
  %m = monarch.spawn_procs : !monarch.mesh<host = 60, gpu = 24>
  %v = monarch.split %m (host -> [dp, pp], gpu -> [tp], pp = 4) : !monarch.mesh<host = 60, gpu = 24>
  %s = monarch.slice %v (pp = 1, dp = 2, tp = 0:4) : !monarch.mesh<dp = 15, pp = 4, tp = 24>
  %r = monarch.rename %s (tp -> x) : !monarch.mesh<tp = 4>
  // CHECK-NEXT: %[[V:.*]] = monarch.view %[[M]] offset 216 (x = 4:1) : !monarch.mesh<host = 60, gpu = 24>
  // CHECK-NEXT: return %[[V]]
  return %r : !monarch.mesh<x = 4>
}

// -----

// A single view of a root stays as written.
// CHECK-LABEL: func.func @single
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 2, gpu = 4>)
func.func @single(%m: !monarch.mesh<host = 2, gpu = 4>) -> !monarch.mesh<gpu = 4> {
  // CHECK-NEXT: %[[S:.*]] = monarch.slice %[[M]] (host = 1)
  %s = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
  // CHECK-NEXT: return %[[S]]
  return %s : !monarch.mesh<gpu = 4>
}

// -----

// Views that change nothing fold away.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 2, gpu = 4>, %[[N:.*]]: !monarch.mesh<r = 8>)
func.func @identities(%m: !monarch.mesh<host = 2, gpu = 4>, %n: !monarch.mesh<r = 8>)
    -> (!monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<r = 8>) {
  %r = monarch.rename %m (host -> host) : !monarch.mesh<host = 2, gpu = 4>
  %s = monarch.slice %m () : !monarch.mesh<host = 2, gpu = 4>
  %p = monarch.split %m () : !monarch.mesh<host = 2, gpu = 4>
  %v = monarch.view %m offset 0 (host = 2:4, gpu = 4:1) : !monarch.mesh<host = 2, gpu = 4>
  %f = monarch.flatten %n -> r : !monarch.mesh<r = 8>
  // CHECK-NEXT: return %[[M]], %[[M]], %[[M]], %[[M]], %[[N]]
  return %r, %s, %p, %v, %f : !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<r = 8>
}

// -----

// A rename back and forth is the root again.
// CHECK-LABEL: func.func @round_trip
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 2, gpu = 4>)
func.func @round_trip(%m: !monarch.mesh<host = 2, gpu = 4>) -> !monarch.mesh<host = 2, gpu = 4> {
  %a = monarch.rename %m (host -> h) : !monarch.mesh<host = 2, gpu = 4>
  %b = monarch.rename %a (h -> host) : !monarch.mesh<h = 2, gpu = 4>
  // CHECK-NEXT: return %[[M]]
  return %b : !monarch.mesh<host = 2, gpu = 4>
}

// -----

// Ops on a folded mesh use the folded value; the tensor ops stay.
// CHECK-LABEL: func.func @users
func.func @users() -> !monarch.tensor<i64, <g = 4>> {
  // CHECK: %[[M:.*]] = monarch.spawn_procs
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  %s = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
  %r = monarch.rename %s (gpu -> g) : !monarch.mesh<gpu = 4>
  // CHECK-NEXT: %[[V:.*]] = monarch.view %[[M]] offset 4 (g = 4:1)
  // CHECK-NEXT: %[[R:.*]] = monarch.rank %[[V]] (g)
  %k = monarch.rank %r (g) : !monarch.tensor<i64, <g = 4>>
  // CHECK-NEXT: return %[[R]]
  return %k : !monarch.tensor<i64, <g = 4>>
}
