//===- ExportTrace.h - The monarch dialect to a traced program --*- C++ -*-===//
//
// The inverse of ImportTrace.h, for testing the import on real programs:
// `exportTrace(module)` is the TracedProgram whose import lowers to the same
// plan as `module` (the plan lowering's program, the local type of every ref,
// and the derivation of every mesh made by rename/split/slice/flatten). The
// frontend never uses it: a real trace is what the eager path sends.
//
//   monarch-opt prog.mlir --monarch-emit-trace=output=prog.trace -o /dev/null
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_IMPORT_EXPORTTRACE_H
#define MONARCH_COMPILER_IMPORT_EXPORTTRACE_H

#include "monarch/tensor/trace.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace monarch {

/// The traced program of the function `entry` of `module` (chosen as
/// lowerToPlan chooses it). Errors are diagnostics on the module's ops.
mlir::FailureOr<plan::TracedProgram> exportTrace(mlir::ModuleOp module,
                                                 llvm::StringRef entry = {});

#define GEN_PASS_DECL
#include "monarch/Compiler/Import/TracePasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "monarch/Compiler/Import/TracePasses.h.inc"

} // namespace monarch

#endif // MONARCH_COMPILER_IMPORT_EXPORTTRACE_H
