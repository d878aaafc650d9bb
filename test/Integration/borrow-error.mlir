// A borrow error (use after drop) is a static error: DESIGN.md §1/§6.4 -- the
// compiler checks borrows before anything is launched, so monarch-run should
// print the DROPPED diagnostic and exit with 2, also with --no-optimize (which
// should skip optimizations, not checks).
// RUN: %expect-exit 2 monarch-run %S/Inputs/use-after-drop.mlir > %t.out 2> %t.err
// RUN: FileCheck %s < %t.err
// RUN: count 0 < %t.out
// RUN: %expect-exit 2 monarch-run %S/Inputs/use-after-drop.mlir --no-optimize > %t.no.out 2> %t.no.err
// RUN: FileCheck %s < %t.no.err
// RUN: count 0 < %t.no.out

// CHECK: use-after-drop.mlir:8:8: error: DROPPED: operand #0 is a borrowed tensor used after its borrow was dropped
// CHECK-NOT: tensor_procs
