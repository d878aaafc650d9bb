//===- ImportTrace.h - A traced program to the monarch dialect --*- C++ -*-===//
//
// Imports a `monarch.plan.TracedProgram` (runtime/tensor/proto/trace.proto) --
// the instructions the Python frontend's eager path sends to workers, in issue
// order, plus the value types and mesh derivations a plan does not carry --
// into the monarch dialect:
//
//   mlir::OwningOpRef<mlir::ModuleOp> module = monarch::importTrace(trace,
//   ctx); if (!module) return failure();   // the diagnostics say why
//
// gives `module { func.func @<entry>() { ... return } }` (plus a private
// function per recording), built with the dialect's own builders and checked
// by its verifiers. This replaces the frontend printing the dialect's syntax
// by hand: one printer (MLIR's), and the IR of a traced program is whatever
// the dialect says it is.
//
// Every instruction kind the eager path sends has a mapping (docs/python.md,
// "Tracing to MLIR", has the table): a recording becomes a private func.func
// and each call of it a func.call. Instructions with no dialect form yet
// (actor calls) and malformed traces (unknown or twice-defined
// refs, unknown meshes, a derivation that does not give the recorded view, a
// value without a type, ...) are error diagnostics, never a crash. Meshes,
// streams and the root are created where first used, as the old tracer did.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_IMPORT_IMPORTTRACE_H
#define MONARCH_COMPILER_IMPORT_IMPORTTRACE_H

#include "monarch/tensor/trace.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <optional>

namespace monarch {

struct TraceImportOptions {
  /// Where a message of the trace (an Instruction, Mesh, MeshOrigin, RefType,
  /// OpSchema, or the TracedProgram itself) was written, for diagnostics about
  /// the trace; nullopt when not known. Text traces give their line and
  /// column (TraceInput.h). Diagnostics about an instruction fall back to its
  /// source location (Instruction.location), others to an unknown location.
  std::function<std::optional<mlir::Location>(
      const google::protobuf::Message &)>
      locate;
};

/// The TracedProgram magic number ("MONT") and the version this importer reads.
inline constexpr uint32_t kTraceMagic = 0x4d4f4e54;
inline constexpr uint32_t kTraceVersion = 1;

/// Imports `trace` into a new module in `context` (which must have the
/// monarch and func dialects loaded or registered). Returns null after
/// emitting error diagnostics when the trace is malformed, uses something
/// the dialect cannot express yet, or gives IR that does not verify.
mlir::OwningOpRef<mlir::ModuleOp>
importTrace(const plan::TracedProgram &trace, mlir::MLIRContext &context,
            const TraceImportOptions &options = {});

/// Instruction.location ("file:line" from the frontend, "file:line:col" from
/// the plan lowering) as an MLIR location: FileLineColLoc(file, line, col),
/// column 0 when absent; unknown for an empty string.
mlir::Location traceLocation(llvm::StringRef location,
                             mlir::MLIRContext &context);

} // namespace monarch

#endif // MONARCH_COMPILER_IMPORT_IMPORTTRACE_H
