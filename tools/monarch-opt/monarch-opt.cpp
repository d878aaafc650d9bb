//===- monarch-opt.cpp - The monarch optimizer driver --------------------===//
//
// mlir-opt with the monarch dialect and passes, plus the upstream dialects a
// traced program uses (func, scf, arith, tensor) and the core transforms
// (canonicalize, cse, ...). Every mlir-opt flag works. With the trace import
// built, a traced program (*.trace, *.trace.txt) is an input too: it is
// imported into the dialect before the passes run (TraceOptMain.h).
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Transforms/Passes.h"
#ifdef MONARCH_HAVE_PLAN_LOWERING
#include "monarch/Compiler/Lowering/LowerToPlan.h"
#endif
#ifdef MONARCH_HAVE_TRACE_IMPORT
#include "monarch/Compiler/Import/ExportTrace.h"
#include "monarch/Compiler/Import/TraceOptMain.h"
#endif
#include "monarch/Dialect/Monarch/IR/MonarchDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

// Hostile input can reach a report_fatal_error in upstream code (e.g. the
// bytecode reader sizing a vector from an unchecked count). Report it as an
// error of the input and exit with status 1, like every other bad input,
// instead of aborting.
static void onFatalError(void *, const char *reason, bool) {
  llvm::errs() << "error: malformed input: " << reason << "\n";
  llvm::errs().flush();
  std::_Exit(1);
}

int main(int argc, char **argv) {
  llvm::install_fatal_error_handler(onFatalError);
  llvm::install_bad_alloc_error_handler(onFatalError);
  mlir::DialectRegistry registry;
  registry.insert<monarch::MonarchDialect, mlir::func::FuncDialect,
                  mlir::scf::SCFDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect>();
  mlir::registerTransformsPasses();
  monarch::registerMonarchPasses();
  monarch::registerMonarchPipelines();
#ifdef MONARCH_HAVE_PLAN_LOWERING
  monarch::registerMonarchLoweringPasses();
#endif
#ifdef MONARCH_HAVE_TRACE_IMPORT
  monarch::registerMonarchTracePasses();
  return mlir::asMainReturnCode(monarch::traceOptMain(
      argc, argv,
      "monarch optimizer: the monarch dialect and its passes\n\n"
      "The input is MLIR (text or bytecode) or a traced program "
      "(monarch.plan.TracedProgram:\n*.trace binary, *.trace.txt protobuf "
      "text), imported into the dialect first.\n",
      registry));
#else
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "monarch optimizer: the monarch dialect and its passes\n",
      registry));
#endif
}
