// mlir-opt's standard flags work on monarch-opt.
// RUN: monarch-opt %s --pass-pipeline='builtin.module(func.func(monarch-resolve-mesh-views))' | FileCheck %s
// RUN: monarch-opt %s --monarch-resolve-mesh-views --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=AFTER
// RUN: monarch-opt %s --emit-bytecode | monarch-opt --canonicalize | FileCheck %s
// RUN: monarch-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: monarch-opt --help | FileCheck %s --check-prefix=HELP

// CHECK-LABEL: func.func @f
func.func @f() -> !monarch.mesh<g = 4> {
  // CHECK: %[[M:.*]] = monarch.spawn_procs
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  %s = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
  %r = monarch.rename %s (gpu -> g) : !monarch.mesh<gpu = 4>
  // CHECK: %[[V:.*]] = monarch.view %[[M]] offset 4 (g = 4:1)
  // CHECK: return %[[V]]
  return %r : !monarch.mesh<g = 4>
}

// AFTER: IR Dump After ResolveMeshViews
// AFTER: monarch.view

// Properties print as `<{...}>` in the generic form.
// GENERIC: "monarch.slice"(%{{.*}}) <{dims = ["host"], starts = array<i64: 1>, steps = array<i64: 0>, stops = array<i64: -9223372036854775808>}>

// HELP-DAG: --monarch-print-mesh-layout
// HELP-DAG: --monarch-resolve-mesh-views
// HELP-DAG: --monarch-verify-borrows
// HELP-DAG: --split-input-file
// HELP-DAG: --verify-diagnostics
