//===- monarch-fuzz.cpp - libFuzzer target: parse, verify, print ---------===//
//
// Feeds arbitrary bytes (text or bytecode) to the MLIR parser with the
// monarch dialect and its upstream companions loaded, verifies what parses,
// and prints + re-parses it. Any crash, hang or sanitizer report is a bug:
// bad input must only ever produce diagnostics.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Import/ParserGuards.h"
#include "monarch/Compiler/Transforms/Passes.h"
#include "monarch/Dialect/Monarch/IR/MonarchDialect.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace mlir;

static MLIRContext &getContext() {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    registry.insert<monarch::MonarchDialect, func::FuncDialect, scf::SCFDialect,
                    arith::ArithDialect, tensor::TensorDialect>();
    auto *ctx = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    ctx->loadAllAvailableDialects();
    // Diagnostics are the expected outcome for most inputs: drop them.
    ctx->getDiagEngine().registerHandler([](Diagnostic &) {});
    return ctx;
  }();
  return *context;
}

static OwningOpRef<ModuleOp> parse(llvm::StringRef text, MLIRContext &ctx) {
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz-input"), llvm::SMLoc());
  ParserConfig config(&ctx, /*verifyAfterParse=*/true);
  return parseSourceFile<ModuleOp>(sourceMgr, config);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Bytecode goes to upstream's reader, which reaches report_fatal_error on
  // some hostile counts (monarch-opt turns that into exit status 1; see
  // test/Tools/monarch-opt/bad-input.test, which also mutates bytecode).
  // Fuzz the text syntax, which is where the monarch dialect's own parsers
  // and verifiers run.
  if (size >= 4 && data[0] == 'M' && data[1] == 'L' && data[2] == 0xEF &&
      data[3] == 'R')
    return 0;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  // What monarch-opt refuses before parsing (text that crashes upstream's
  // parser, ParserGuards.h) is refused here too.
  if (monarch::findParserCrashSyntax(text))
    return 0;
  MLIRContext &ctx = getContext();
  OwningOpRef<ModuleOp> module = parse(text, ctx);
  if (!module)
    return 0;
  // Whatever verifies must print and parse back.
  std::string printed;
  llvm::raw_string_ostream os(printed);
  module->print(os);
  os.flush();
  if (!parse(printed, ctx)) {
    llvm::errs() << "printed IR does not parse back:\n" << printed << "\n";
    __builtin_trap();
  }
  // Folding and view resolution must keep valid IR valid (the pass manager
  // verifies after each pass); the borrow checker may report errors.
  PassManager pm(&ctx);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(monarch::createResolveMeshViews());
  if (failed(pm.run(*module))) {
    llvm::errs() << "canonicalization broke valid IR:\n" << printed << "\n";
    __builtin_trap();
  }
  PassManager check(&ctx);
  check.addPass(monarch::createVerifyBorrows());
  (void)check.run(*module);
  return 0;
}
