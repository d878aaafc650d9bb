// RUN: monarch-opt %s --split-input-file --monarch-schedule-overlap | FileCheck %s
// RUN: monarch-opt %s --split-input-file --monarch-schedule-overlap=max-in-flight=1 | FileCheck %s --check-prefix=CAP

!T = !monarch.tensor<64x64xf32, <dp = 4>>

// The start rises to just after its input, the wait sinks to just before its
// first use, and the independent compute fills the gap.
// CHECK-LABEL: func.func @raise_and_sink
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<dp = 4>, %[[X:[^:]*]]: {{.*}}, %[[Y:[^:]*]]: {{.*}})
func.func @raise_and_sink(%m: !monarch.mesh<dp = 4>, %x: !T, %y: !T) -> !T {
  // CHECK: %[[G:.*]] = monarch.aten "aten::neg"(%[[X]])
  // CHECK-NEXT: %[[S:.*]] = monarch.reduce_start %[[G]]
  // CHECK-NEXT: %[[A:.*]] = monarch.aten "aten::mm"(%[[Y]], %[[Y]])
  // CHECK-NEXT: %[[B:.*]] = monarch.aten "aten::relu"(%[[A]])
  // CHECK-NEXT: %[[W:.*]] = monarch.wait %[[S]]
  // CHECK-NEXT: monarch.aten "aten::add.Tensor"(%[[W]], %[[B]]
  %g = monarch.aten "aten::neg"(%x) on %m : (!T) -> !T
  %s = monarch.reduce_start %g (dp) sum : !T -> !monarch.async<!T>
  %w = monarch.wait %s : !monarch.async<!T>
  %a = monarch.aten "aten::mm"(%y, %y) on %m : (!T, !T) -> !T
  %b = monarch.aten "aten::relu"(%a) on %m : (!T) -> !T
  %c = monarch.aten "aten::add.Tensor"(%w, %b, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
  return %c : !T
}

// -----

!T = !monarch.tensor<64x64xf32, <dp = 4>>

// An in-place collective writes its tensor until the wait: a read of the
// tensor stays after the wait, and a write of an input of the collective
// stays after the start.
// CHECK-LABEL: func.func @storage_order
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<dp = 4>, %[[G:[^:]*]]: {{.*}}, %[[Y:[^:]*]]: {{.*}})
func.func @storage_order(%m: !monarch.mesh<dp = 4>, %g: !T, %y: !T) -> !T {
  // CHECK: %[[S:.*]] = monarch.reduce_start %[[G]] (dp) sum inplace
  // CHECK-NEXT: %[[A:.*]] = monarch.aten "aten::mm"(%[[Y]], %[[Y]])
  // CHECK-NEXT: monarch.wait %[[S]]
  // CHECK-NEXT: monarch.aten "aten::neg"(%[[G]])
  // CHECK-NEXT: %[[U:.*]] = monarch.aten "aten::mul_.Tensor"(%[[G]], %[[Y]])
  // CHECK-NEXT: monarch.aten "aten::mul_.Tensor"(%[[U]], %[[A]])
  %s = monarch.reduce_start %g (dp) sum inplace : !T -> !monarch.async<!T>
  %w = monarch.wait %s : !monarch.async<!T>
  %n = monarch.aten "aten::neg"(%g) on %m : (!T) -> !T
  %u = monarch.aten "aten::mul_.Tensor"(%g, %y) on %m : (!T, !T) -> !T
  %a = monarch.aten "aten::mm"(%y, %y) on %m : (!T, !T) -> !T
  %v = monarch.aten "aten::mul_.Tensor"(%u, %a) on %m : (!T, !T) -> !T
  return %n : !T
}

// -----

!T = !monarch.tensor<64x64xf32, <dp = 4>>

// A view shares its tensor's storage: a read through a view made before an
// in-place collective stays after the wait, like a read of the tensor itself
// (it is not independent compute to fill the gap with).
// CHECK-LABEL: func.func @view_reads_wait
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<dp = 4>, %[[G:[^:]*]]: {{.*}}, %[[Y:[^:]*]]: {{.*}})
func.func @view_reads_wait(%m: !monarch.mesh<dp = 4>, %g: !T, %y: !T) -> !T {
  // CHECK: %[[T:.*]] = monarch.aten "aten::t"(%[[G]])
  // CHECK: %[[S:.*]] = monarch.reduce_start %[[G]] (dp) sum inplace
  // CHECK-NEXT: monarch.wait %[[S]]
  // CHECK-NEXT: monarch.aten "aten::mm"(%[[T]], %[[Y]])
  %t = monarch.aten "aten::t"(%g) on %m : (!T) -> !T
  %s = monarch.reduce_start %g (dp) sum inplace : !T -> !monarch.async<!T>
  %w = monarch.wait %s : !monarch.async<!T>
  %b = monarch.aten "aten::mm"(%t, %y) on %m : (!T, !T) -> !T
  return %b : !T
}

// -----

!T = !monarch.tensor<64x64xf32, <dp = 4>>

// A write to a tensor before the collective reads it stays before the start.
// CHECK-LABEL: func.func @write_before_start
// CHECK-SAME: (%[[M:.*]]: !monarch.mesh<dp = 4>, %[[G:[^:]*]]: {{.*}}, %[[Y:[^:]*]]: {{.*}})
func.func @write_before_start(%m: !monarch.mesh<dp = 4>, %g: !T, %y: !T) -> !T {
  // CHECK: monarch.aten "aten::add_.Tensor"(%[[G]], %[[Y]]
  // CHECK-NEXT: monarch.reduce_start %[[G]]
  %a = monarch.aten "aten::add_.Tensor"(%g, %y, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
  %s = monarch.reduce_start %g (dp) sum : !T -> !monarch.async<!T>
  %w = monarch.wait %s : !monarch.async<!T>
  return %w : !T
}

// -----

!T = !monarch.tensor<64x64xf32, <dp = 4, tp = 2>>

// Collectives of one communicator keep their order even when the second's
// input is ready first; another communicator's may pass them.
// CHECK-LABEL: func.func @communicator_order
func.func @communicator_order(%m: !monarch.mesh<dp = 4, tp = 2>, %x: !T, %y: !T, %z: !T) -> (!T, !T, !T) {
  // CHECK: %[[S3:.*]] = monarch.reduce_start %{{.*}} (tp) sum
  // CHECK-NEXT: %[[A:.*]] = monarch.aten "aten::mm"(%{{.*}}, %{{.*}})
  // CHECK-NEXT: %[[S1:.*]] = monarch.reduce_start %[[A]] (dp) sum
  // CHECK-NEXT: %[[S2:.*]] = monarch.reduce_start %{{.*}} (dp) max
  %a = monarch.aten "aten::mm"(%x, %x) on %m : (!T, !T) -> !T
  %s1 = monarch.reduce_start %a (dp) sum : !T -> !monarch.async<!T>
  %s2 = monarch.reduce_start %y (dp) max : !T -> !monarch.async<!T>
  %s3 = monarch.reduce_start %z (tp) sum : !T -> !monarch.async<!T>
  %w1 = monarch.wait %s1 : !monarch.async<!T>
  %w2 = monarch.wait %s2 : !monarch.async<!T>
  %w3 = monarch.wait %s3 : !monarch.async<!T>
  return %w1, %w2, %w3 : !T, !T, !T
}

// -----

!T = !monarch.tensor<64x64xf32, <dp = 4>>

// Fetches keep their order: the second, whose input is ready, still waits
// for the first, which needs the collective. An op with unknown effects (a
// call) is a barrier that nothing crosses.
// CHECK-LABEL: func.func @host_order
func.func private @log()
func.func @host_order(%m: !monarch.mesh<dp = 4>, %x: !T, %y: !T) -> !T {
  // CHECK: %[[S:.*]] = monarch.reduce_start
  // CHECK-NEXT: %[[N:.*]] = monarch.aten "aten::neg"
  // CHECK-NEXT: %[[W:.*]] = monarch.wait %[[S]]
  // CHECK-NEXT: monarch.fetch_shard %[[W]] :
  // CHECK-NEXT: monarch.fetch_shard %[[N]] :
  // CHECK-NEXT: call @log()
  // CHECK-NEXT: monarch.aten "aten::relu"
  %s = monarch.reduce_start %x (dp) sum : !T -> !monarch.async<!T>
  %w = monarch.wait %s : !monarch.async<!T>
  %f1 = monarch.fetch_shard %w : !T -> !monarch.host<tensor<64x64xf32>>
  %n = monarch.aten "aten::neg"(%y) on %m : (!T) -> !T
  %f2 = monarch.fetch_shard %n : !T -> !monarch.host<tensor<64x64xf32>>
  call @log() : () -> ()
  %r = monarch.aten "aten::relu"(%y) on %m : (!T) -> !T
  return %r : !T
}

// -----

!T = !monarch.tensor<64x64xf32, <dp = 4>>

// With max-in-flight=1 the second start waits for the first collective;
// without a cap both are issued before the compute.
// CHECK-LABEL: func.func @in_flight
// CHECK: %[[S1:.*]] = monarch.reduce_start
// CHECK-NEXT: %[[S2:.*]] = monarch.reduce_start
// CHECK-NEXT: monarch.aten "aten::mm"
// CHECK-NEXT: monarch.wait %[[S1]]
// CHECK-NEXT: monarch.wait %[[S2]]
// CAP-LABEL: func.func @in_flight
// CAP: %[[S1:.*]] = monarch.reduce_start
// CAP-NEXT: monarch.aten "aten::mm"
// CAP-NEXT: monarch.wait %[[S1]]
// CAP-NEXT: %[[S2:.*]] = monarch.reduce_start
// CAP-NEXT: monarch.wait %[[S2]]
func.func @in_flight(%m: !monarch.mesh<dp = 4>, %x: !T, %y: !T) -> (!T, !T, !T) {
  %s1 = monarch.reduce_start %x (dp) sum : !T -> !monarch.async<!T>
  %w1 = monarch.wait %s1 : !monarch.async<!T>
  %s2 = monarch.reduce_start %y (dp) sum : !T -> !monarch.async<!T>
  %w2 = monarch.wait %s2 : !monarch.async<!T>
  %a = monarch.aten "aten::mm"(%x, %y) on %m : (!T, !T) -> !T
  return %w1, %w2, %a : !T, !T, !T
}

// -----

!T = !monarch.tensor<64x64xf32, <gpu = 4>>
!D = !monarch.tensor<64x64xf32, <host = 2, gpu = 4>>

// A to_mesh copy reads its source until the wait: an in-place write of the
// source stays after the wait, independent compute does not.
// CHECK-LABEL: func.func @to_mesh_source
// CHECK-SAME: (%[[M:[^:]*]]: {{[^%]*}}, %[[D:[^:]*]]: {{[^%]*}}, %[[X:[^:]*]]: {{[^%]*}}, %[[Y:[^:]*]]: {{[^%]*}})
func.func @to_mesh_source(%m: !monarch.mesh<gpu = 4>, %d: !monarch.mesh<host = 2, gpu = 4>, %x: !T, %y: !T) -> (!D, !T) {
  // CHECK-NEXT: %[[S:.*]] = monarch.to_mesh_start %[[X]] to %[[D]]
  // CHECK-NEXT: monarch.aten "aten::mm"(%[[Y]], %[[Y]])
  // CHECK-NEXT: monarch.wait %[[S]]
  // CHECK-NEXT: monarch.aten "aten::zero_"(%[[X]])
  %s = monarch.to_mesh_start %x to %d : !T -> !monarch.async<!D>
  %w = monarch.wait %s : !monarch.async<!D>
  %z = monarch.aten "aten::zero_"(%x) on %m : (!T) -> !T
  %a = monarch.aten "aten::mm"(%y, %y) on %m : (!T, !T) -> !T
  return %w, %a : !D, !T
}
