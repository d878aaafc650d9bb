// RUN: %expect-exit 1 monarch-run %s > %t.out 2> %t.err
// RUN: FileCheck %s < %t.out
// RUN: FileCheck %s --check-prefix=ERR < %t.err
// RUN: %python -c "import sys; n = sum(1 for _ in open(sys.argv[1])); assert n <= 30, n" %t.err

// A loop whose body fails on every trip: each trip is a new root failure,
// but monarch-run reports only the first ten of one instruction and counts
// the rest, so 500 trips on 2 ranks print a bounded stderr (found by
// bench/reliability/campaign.py: a mutated plan's loop of failing trips
// filled stderr without bound). The fetch reports the failure as usual.

// CHECK: fetch #{{[0-9]+}} rank 0 (gpu=0): error: instruction #[[INST:[0-9]+]] {{.*}}failed on rank 0: {{.*}}aten::no_such_op

// ERR-COUNT-10: monarch-run: error: instruction #{{[0-9]+}}
// ERR-NEXT: monarch-run: further failures of instruction #{{[0-9]+}} are counted, not reported
// ERR: monarch-run: instruction #{{[0-9]+}} failed 1000 times in all

!T = !monarch.tensor<4xf32, <gpu = 2>>

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c500 = arith.constant 500 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %x0 = monarch.aten "aten::zeros"(array<i64: 4>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !T
  %x = scf.for %i = %c0 to %c500 step %c1 iter_args(%acc = %x0) -> (!T) {
    %n = monarch.aten "aten::no_such_op"(%acc) on %m : (!T) -> !T
    scf.yield %n : !T
  }
  %f0 = monarch.fetch_shard %x : !T -> !monarch.host<tensor<4xf32>>
  return
}
