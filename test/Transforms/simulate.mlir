// RUN: monarch-opt %s --monarch-simulate="profile=%S/Inputs/profile.json trace-file=%t.json" --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --input-file=%t.json --check-prefix=TRACE
// RUN: not monarch-opt %s --monarch-simulate="trace-file=%t.missing/dir/x.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADPATH

// BADPATH: error: cannot write trace '{{.*}}x.json'

// Profile: an elementwise op on 1000 f32 takes 1us; an all-reduce of them
// over dp = 4 takes 2 * 3/4 * 4000 B / 1 GB/s = 6us.

!T = !monarch.tensor<1000xf32, <dp = 4>>
!C = !monarch.tensor<1000xf32, <dp = 4>, stream = "comm">

// On one stream the collective blocks the compute behind it:
// neg [0,1], all-reduce [1,7], neg [7,8], neg [8,9], add [9,10].
// CHECK: :[[@LINE+1]]:1: remark: simulated step 10.000us; stream default: busy 10.000us; overlap 0.00
func.func @one_stream(%m: !monarch.mesh<dp = 4>, %x: !T) -> !T {
  %a = monarch.aten "aten::neg"(%x) on %m : (!T) -> !T
  %s = monarch.reduce_start %a (dp) sum inplace : !T -> !monarch.async<!T>
  %b = monarch.aten "aten::neg"(%x) on %m : (!T) -> !T
  %c = monarch.aten "aten::neg"(%b) on %m : (!T) -> !T
  %w = monarch.wait %s : !monarch.async<!T>
  %d = monarch.aten "aten::add.Tensor"(%w, %c, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
  return %d : !T
}

// On a comm stream the two negs run during the all-reduce [1,7]; the drop
// makes the default stream wait for it before the add [7,8]. 2 of the 6us of
// communication are hidden.
// CHECK: :[[@LINE+1]]:1: remark: simulated step 8.000us; stream default: busy 4.000us; stream "comm": busy 6.000us; overlap 0.33
func.func @comm_stream(%m: !monarch.mesh<dp = 4>, %x: !T) -> !T {
  %comm = monarch.stream_create : !monarch.stream<"comm">
  %a = monarch.aten "aten::neg"(%x) on %m : (!T) -> !T
  %a2, %bw = monarch.borrow %a to %comm mutable : !T -> !C
  monarch.borrow_first_use %bw
  %s = monarch.reduce_start %a2 (dp) sum inplace : !C -> !monarch.async<!C>
  %b = monarch.aten "aten::neg"(%x) on %m : (!T) -> !T
  %c = monarch.aten "aten::neg"(%b) on %m : (!T) -> !T
  %w = monarch.wait %s : !monarch.async<!C>
  monarch.borrow_last_use %bw
  monarch.borrow_drop %bw
  %d = monarch.aten "aten::add.Tensor"(%a, %c, #monarch.scalar<1 : i64>) on %m : (!T, !T) -> !T
  return %d : !T
}

// No device work at all.
// CHECK: :[[@LINE+1]]:1: remark: simulated step 0.000us; stream default: busy 0.000us; overlap n/a
func.func @empty() {
  return
}

// TRACE: "traceEvents":[
// TRACE-SAME: {"name":"process_name","ph":"M","pid":0,"args":{"name":"one_stream"}}
// TRACE-SAME: {"name":"aten::neg","cat":"compute","ph":"X","pid":0,"tid":0,"ts":0,"dur":1}
// TRACE-SAME: {"name":"all_reduce","cat":"collective","ph":"X","pid":0,"tid":0,"ts":1,"dur":6}
// TRACE-SAME: {"name":"process_name","ph":"M","pid":1,"args":{"name":"comm_stream"}}
// TRACE-SAME: {"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"stream \"comm\""}}
// TRACE-SAME: {"name":"all_reduce","cat":"collective","ph":"X","pid":1,"tid":1,"ts":1,"dur":6}
// TRACE-SAME: {"name":"aten::neg","cat":"compute","ph":"X","pid":1,"tid":0,"ts":1,"dur":1}
// TRACE-SAME: {"name":"aten::neg","cat":"compute","ph":"X","pid":1,"tid":0,"ts":2,"dur":1}
// TRACE-SAME: {"name":"aten::add.Tensor","cat":"compute","ph":"X","pid":1,"tid":0,"ts":7,"dur":1}
// TRACE-SAME: "displayTimeUnit":"ns"
