//===- CompileToPlan.h - .mlir to plan in one call, MLIR-free API -*- C++
//-*-===//
//
// What monarch-run calls to run a .mlir file directly (DESIGN.md §3): parse,
// verify, optimize with the default pipeline, lower to the plan. The header
// names nothing of MLIR, so runtime code built with exceptions and its own
// flags can call it; the library links libMLIR.so.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_DRIVER_COMPILETOPLAN_H
#define MONARCH_COMPILER_DRIVER_COMPILETOPLAN_H

#include <string>

namespace monarch {

struct CompileOptions {
  /// Function to lower; empty: "main", or the module's only function.
  std::string entry;
  /// Run the default pipeline (overlap, streams, borrows) before lowering.
  bool optimize = true;
  /// Extra pipeline options, e.g. "bucket-bytes=1048576" (textual, as for
  /// --monarch-default-pipeline="...").
  std::string pipelineOptions;
  /// Free the IR when done. A tool that exits right after compiling can skip
  /// that (as clang's -disable-free does): tearing down the context of a
  /// 100,000-op module costs a tenth of the compile.
  bool freeIR = true;
};

struct CompileResult {
  bool ok = false;
  /// The serialized plan (monarch.plan.Program) when ok.
  std::string plan;
  /// Diagnostics as monarch-opt prints them ("file:line:col: error: ...").
  std::string diagnostics;
};

/// Compiles the .mlir (text or bytecode) file at `path`.
CompileResult compileFileToPlan(const std::string &path,
                                const CompileOptions &options = {});

} // namespace monarch

#endif // MONARCH_COMPILER_DRIVER_COMPILETOPLAN_H
