//===- TraceOptMain.h - mlir-opt that also reads traced programs -*- C++
//-*-===//
//
// monarch-opt's main: MlirOptMain, except that a traced program (`*.trace`,
// `*.trace.txt`, or binary TracedProgram bytes on stdin; TraceInput.h) is
// imported into the monarch dialect before the pass pipeline runs, so
//
//   monarch-opt prog.trace --monarch-default-pipeline \
//       --monarch-emit-plan=output=prog.plan -o prog.mlir
//
// works like it does on `prog.mlir`, and `monarch-opt prog.trace` prints the
// IR. Every mlir-opt flag keeps working: each imported module is written as
// bytecode (locations included) and handed to MlirOptMain as its input.
// `--split-input-file` splits a text trace before the import, and
// `--verify-diagnostics` checks the import's diagnostics against the
// `expected-*` comments of the trace text (a `# expected-error {{...}}` line);
// diagnostics of the passes that follow are located at the traced program's
// source lines, outside any buffer, so there they can only be unexpected.
//
// A library (MonarchImport) rather than code in tools/monarch-opt, so that
// every build of monarch-opt (the shared one and monarch-opt-static) links the
// same driver.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_IMPORT_TRACEOPTMAIN_H
#define MONARCH_COMPILER_IMPORT_TRACEOPTMAIN_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/LLVM.h"

namespace monarch {

/// Registers and parses mlir-opt's command line (`toolName` heads --help),
/// then processes the input: a traced program as above, anything else with
/// MlirOptMain unchanged.
llvm::LogicalResult traceOptMain(int argc, char **argv,
                                 llvm::StringRef toolName,
                                 mlir::DialectRegistry &registry);

} // namespace monarch

#endif // MONARCH_COMPILER_IMPORT_TRACEOPTMAIN_H
