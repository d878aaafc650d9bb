//===- TraceInput.h - Reading a traced program from a file ------*- C++ -*-===//
//
// A TracedProgram arrives as protobuf: binary (`*.trace`, what the frontend
// writes) or text format (`*.trace.txt`, what tests and people write). This
// reads either from a buffer and imports it, with diagnostics about the trace
// located where the text wrote the offending message (line and column), so
// that `--verify-diagnostics` can check them against `expected-error`
// comments in a `.trace.txt` file:
//
//   if (TraceFormat f = traceFormatOf(buffer); f != TraceFormat::None)
//     module = importTraceBuffer(buffer, f, context);
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_IMPORT_TRACEINPUT_H
#define MONARCH_COMPILER_IMPORT_TRACEINPUT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/MemoryBuffer.h"

namespace monarch {

enum class TraceFormat { None, Binary, Text };

/// The format of `buffer` if it holds a traced program: by its name
/// (`.trace`, `.trace.txt`), or binary when its bytes start with the
/// TracedProgram magic (so stdin works too); None for anything else (MLIR).
TraceFormat traceFormatOf(const llvm::MemoryBuffer &buffer);

/// Parses `buffer` as a TracedProgram of `format` and imports it
/// (ImportTrace.h). Parse errors and import errors are diagnostics in
/// `context`, located in the buffer (named by its identifier); returns null
/// after reporting them.
mlir::OwningOpRef<mlir::ModuleOp>
importTraceBuffer(const llvm::MemoryBuffer &buffer, TraceFormat format,
                  mlir::MLIRContext &context);

} // namespace monarch

#endif // MONARCH_COMPILER_IMPORT_TRACEINPUT_H
