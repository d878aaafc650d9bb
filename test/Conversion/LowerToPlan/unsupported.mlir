// RUN: monarch-opt %s --split-input-file --verify-diagnostics --monarch-emit-plan="format=text" -o /dev/null
// RUN: not monarch-opt %s --split-input-file --monarch-emit-plan="format=text entry=nope" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ENTRY
// RUN: not monarch-opt %s --split-input-file --monarch-emit-plan="format=yaml" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT

// The lowering never guesses: whatever it cannot translate faithfully is an
// error naming the op.

// ENTRY: error: no function 'nope' to lower
// FORMAT: error: --monarch-emit-plan: unknown format 'yaml' (expected 'binary' or 'text')

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // expected-error@+1 {{cannot lower 'monarch.spawn_actor' to the plan}}
  %a = monarch.spawn_actor "trainer" on %m : !monarch.actor<"Trainer", <gpu = 2>>
  return
}

// -----

func.func @main() {
  %true = arith.constant true
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // expected-error@+1 {{cannot lower 'scf.if' to the plan}}
  scf.if %true {
    %r = monarch.rank %m (gpu) : !monarch.tensor<i64, <gpu = 2>>
  }
  return
}

// -----

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // expected-error@+1 {{cannot lower 'scf.for' to the plan: its induction variable is used by 'arith.index_cast': only monarch.index_tensor may use it (the plan has no scalar values)}}
  scf.for %i = %c0 to %c4 step %c1 {
    %j = arith.index_cast %i : index to i64
  }
  return
}

// -----

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{cannot lower 'arith.addi' to the plan}}
  %c5 = arith.addi %c4, %c1 : index
  return
}

// -----

// A plan loop runs at most 2^31 - 1 times (plan.proto's Loop.MAX_TRIPS).
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %big = arith.constant 3000000000 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // expected-error@+1 {{cannot lower 'scf.for' to the plan: it runs 3000000000 times, more than a plan loop may (2147483647)}}
  scf.for %i = %c0 to %big step %c1 {
    %r = monarch.rank %m (gpu) : !monarch.tensor<i64, <gpu = 2>>
  }
  return
}

// -----

func.func @main() {
  %lo = arith.constant -9000000000000000000 : index
  %hi = arith.constant 9000000000000000000 : index
  %step = arith.constant 1000000000000000000 : index
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // expected-error@+1 {{cannot lower 'scf.for' to the plan: its trip count overflows int64}}
  scf.for %i = %lo to %hi step %step {
    %r = monarch.rank %m (gpu) : !monarch.tensor<i64, <gpu = 2>>
  }
  return
}

// -----

func.func @main() {
  // expected-note@+1 {{the root mesh}}
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // expected-error@+1 {{cannot lower a second 'monarch.spawn_procs' to the plan: a plan has one root mesh}}
  %n = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %r = monarch.rank %n (gpu) : !monarch.tensor<i64, <gpu = 2>>
  return
}

// -----

// expected-error@+1 {{the entry function cannot take arguments: the plan has no inputs}}
func.func @main(%t: !monarch.tensor<2xf32, <gpu = 2>>) {
  return
}

// -----

func.func @f(%m: !monarch.mesh<gpu = 2>) {
  // expected-error@+1 {{cannot lower 'func.call' to the plan: recursive calls cannot be recorded}}
  func.call @f(%m) : (!monarch.mesh<gpu = 2>) -> ()
  return
}

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  func.call @f(%m) : (!monarch.mesh<gpu = 2>) -> ()
  return
}

// -----

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  %x = monarch.aten "aten::zeros"(array<i64: 2>, #monarch.dtype<float32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<?xf32, <gpu = 2>>
  // expected-error@+1 {{cannot lower 'monarch.reduce' to the plan: the tensor '!monarch.tensor<?xf32, <gpu = 2>>' has a dynamic shape, which the plan needs static}}
  %r = monarch.reduce %x (gpu) sum : !monarch.tensor<?xf32, <gpu = 2>> -> !monarch.tensor<?xf32, <gpu = 2>>
  return
}

// -----

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // expected-error@+1 {{cannot lower 'monarch.aten' to the plan: argument #1: dtype complex32 has no plan dtype}}
  %x = monarch.aten "aten::zeros"(array<i64: 2>, #monarch.dtype<complex32>, #monarch.none, #monarch.none, #monarch.none) on %m : () -> !monarch.tensor<2xf32, <gpu = 2>>
  return
}

// -----

func.func @main() {
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  // expected-error@+1 {{cannot lower 'monarch.aten' to the plan: argument #1: layout mkldnn has no plan layout}}
  %x = monarch.aten "aten::zeros"(array<i64: 2>, #monarch.layout<mkldnn>) on %m : () -> !monarch.tensor<2xf32, <gpu = 2>>
  return
}

// -----

// expected-error@+1 {{the program has no 'monarch.spawn_procs': a plan needs a root mesh}}
func.func @main() {
  return
}

