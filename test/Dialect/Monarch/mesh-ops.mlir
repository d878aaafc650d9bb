// RUN: monarch-opt %s --verify-roundtrip | FileCheck %s
// RUN: monarch-opt %s --emit-bytecode | monarch-opt | FileCheck %s

// CHECK-LABEL: func.func @spawn
func.func @spawn() -> (!monarch.mesh<gpu = 8>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<>) {
  // CHECK: %[[A:.*]] = monarch.spawn_procs : !monarch.mesh<gpu = 8>
  %a = monarch.spawn_procs : !monarch.mesh<gpu = 8>
  // CHECK: %[[B:.*]] = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  %b = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: %[[C:.*]] = monarch.spawn_procs : !monarch.mesh<>
  %c = monarch.spawn_procs : !monarch.mesh<>
  // CHECK: return %[[A]], %[[B]], %[[C]]
  return %a, %b, %c : !monarch.mesh<gpu = 8>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<>
}

// CHECK-LABEL: func.func @rename
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 2, gpu = 4>)
func.func @rename(%m: !monarch.mesh<host = 2, gpu = 4>) -> !monarch.mesh<h = 2, "my gpu" = 4> {
  // CHECK: %[[R:.*]] = monarch.rename %[[M]] (host -> h, gpu -> "my gpu") : !monarch.mesh<host = 2, gpu = 4>
  %r = monarch.rename %m (host -> h, gpu -> "my gpu") : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: return %[[R]] : !monarch.mesh<h = 2, "my gpu" = 4>
  return %r : !monarch.mesh<h = 2, "my gpu" = 4>
}

// CHECK-LABEL: func.func @split
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 60, gpu = 24>)
func.func @split(%m: !monarch.mesh<host = 60, gpu = 24>) -> !monarch.mesh<dp = 15, pp = 4, tp = 24> {
  // CHECK: %[[S:.*]] = monarch.split %[[M]] (host -> [dp, pp], gpu -> [tp], pp = 4) : !monarch.mesh<host = 60, gpu = 24>
  %s = monarch.split %m (host -> [dp, pp], gpu -> [tp], pp = 4) : !monarch.mesh<host = 60, gpu = 24>
  // CHECK: return %[[S]] : !monarch.mesh<dp = 15, pp = 4, tp = 24>
  return %s : !monarch.mesh<dp = 15, pp = 4, tp = 24>
}

// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 4, gpu = 8>)
func.func @slice(%m: !monarch.mesh<host = 4, gpu = 8>) -> (!monarch.mesh<gpu = 8>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<gpu = 2>) {
  // CHECK: %[[A:.*]] = monarch.slice %[[M]] (host = 1) : !monarch.mesh<host = 4, gpu = 8>
  %a = monarch.slice %m (host = 1) : !monarch.mesh<host = 4, gpu = 8>
  // CHECK: %[[B:.*]] = monarch.slice %[[M]] (host = 1:3, gpu = ::2) : !monarch.mesh<host = 4, gpu = 8>
  %b = monarch.slice %m (host = 1:3, gpu = ::2) : !monarch.mesh<host = 4, gpu = 8>
  // CHECK: %[[C:.*]] = monarch.slice %[[M]] (host = -1, gpu = :4:2) : !monarch.mesh<host = 4, gpu = 8>
  %c = monarch.slice %m (host = -1, gpu = :4:2) : !monarch.mesh<host = 4, gpu = 8>
  // CHECK: return %[[A]], %[[B]], %[[C]]
  return %a, %b, %c : !monarch.mesh<gpu = 8>, !monarch.mesh<host = 2, gpu = 4>, !monarch.mesh<gpu = 2>
}

// CHECK-LABEL: func.func @flatten
func.func @flatten() -> !monarch.mesh<ranks = 8> {
  // CHECK: %[[M:.*]] = monarch.spawn_procs
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: %[[F:.*]] = monarch.flatten %[[M]] -> ranks : !monarch.mesh<host = 2, gpu = 4>
  %f = monarch.flatten %m -> ranks : !monarch.mesh<host = 2, gpu = 4>
  // CHECK: return %[[F]] : !monarch.mesh<ranks = 8>
  return %f : !monarch.mesh<ranks = 8>
}

// CHECK-LABEL: func.func @view
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<host = 60, gpu = 24>)
func.func @view(%m: !monarch.mesh<host = 60, gpu = 24>) -> !monarch.mesh<dp = 15, tp = 24> {
  // CHECK: %[[V:.*]] = monarch.view %[[M]] offset 24 (dp = 15:96, tp = 24:1) : !monarch.mesh<host = 60, gpu = 24>
  %v = monarch.view %m offset 24 (dp = 15:96, tp = 24:1) : !monarch.mesh<host = 60, gpu = 24>
  // CHECK: return %[[V]] : !monarch.mesh<dp = 15, tp = 24>
  return %v : !monarch.mesh<dp = 15, tp = 24>
}
