//===- CompileToPlan.cpp - .mlir to plan in one call ----------------------===//

#include "monarch/Compiler/Driver/CompileToPlan.h"

#include "monarch/Compiler/Lowering/LowerToPlan.h"
#include "monarch/Compiler/Transforms/Passes.h"
#include "monarch/Dialect/Monarch/IR/MonarchDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <mutex>

using namespace mlir;

namespace monarch {

CompileResult compileFileToPlan(const std::string &path,
                                const CompileOptions &options) {
  // Pipelines are found by name in the global registry, filled once.
  static std::once_flag registered;
  std::call_once(registered, [] {
    registerMonarchPasses();
    registerMonarchPipelines();
  });

  CompileResult result;
  llvm::raw_string_ostream diagnostics(result.diagnostics);
  std::string error;
  auto file = openInputFile(path, &error);
  if (!file) {
    diagnostics << "error: " << error << "\n";
    return result;
  }
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());

  DialectRegistry registry;
  registry.insert<MonarchDialect, func::FuncDialect, scf::SCFDialect,
                  arith::ArithDialect, tensor::TensorDialect>();
  auto ownedContext = std::make_unique<MLIRContext>(registry);
  MLIRContext &context = *ownedContext;
  context.disableMultithreading();
  // Diagnostics name the op; a dump of the whole operation is noise here.
  context.printOpOnDiagnostic(false);
  SourceMgrDiagnosticHandler handler(sources, &context, diagnostics);

  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    return result;
  if (failed(verify(*module)))
    return result;

  PassManager pm(&context);
  // The pass manager is anchored on builtin.module already: the textual
  // pipeline lists its elements only. The lowering resolves mesh views
  // itself, so neither canonicalization nor --monarch-resolve-mesh-views is
  // needed (on a 100,000-op program they cost a fifth of the compile).
  // Borrow errors are static errors: checked (and nothing launched) whether
  // or not the program is optimized; the default pipeline ends with the check.
  std::string pipeline =
      options.optimize
          ? "monarch-default-pipeline{" + options.pipelineOptions + "}"
          : std::string("monarch-verify-borrows");
  if (failed(parsePassPipeline(pipeline, pm, diagnostics))) {
    diagnostics << "error: bad pipeline '" << pipeline << "'\n";
    return result;
  }
  if (failed(pm.run(*module)))
    return result;

  FailureOr<plan::Program> program = lowerToPlan(*module, options.entry);
  if (failed(program))
    return result;
  result.plan = program->SerializeAsString();
  result.ok = true;
  if (!options.freeIR) {
    // Deliberately left to the process's exit (see CompileOptions::freeIR).
    (void)module.release();
    (void)ownedContext.release();
  }
  return result;
}

} // namespace monarch
