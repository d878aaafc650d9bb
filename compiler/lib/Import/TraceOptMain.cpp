//===- TraceOptMain.cpp - mlir-opt that also reads traced programs --------===//
//
// See TraceOptMain.h. The non-trace path is MlirOptMain's own
// (inputFilename, outputFilename) overload, step for step.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Import/TraceOptMain.h"

#include "monarch/Compiler/Import/ParserGuards.h"
#include "monarch/Compiler/Import/TraceInput.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <utility>

using namespace mlir;
using namespace monarch;

namespace {

/// Imports one (chunk of a) trace and runs mlir-opt's processing on the
/// result.
LogicalResult processTrace(std::unique_ptr<llvm::MemoryBuffer> chunk,
                           TraceFormat format, raw_ostream &os,
                           DialectRegistry &registry,
                           const MlirOptMainConfig &config) {
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(chunk), llvm::SMLoc());
  const llvm::MemoryBuffer &buffer =
      *sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());

  OwningOpRef<ModuleOp> module;
  if (config.shouldVerifyDiagnostics()) {
    context.printOpOnDiagnostic(false);
    SourceMgrDiagnosticVerifierHandler verifier(
        sourceMgr, &context, config.verifyDiagnosticsLevel());
    module = importTraceBuffer(buffer, format, context);
    LogicalResult expected = verifier.verify();
    // A chunk that fails to import passes when it fails as expected.
    if (!module || failed(expected))
      return expected;
  } else {
    SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    module = importTraceBuffer(buffer, format, context);
    if (!module)
      return failure();
  }

  // The imported module becomes MlirOptMain's input: every flag applies to
  // it as to a parsed file. Bytecode round-trips exactly (locations
  // included) and reads back about twice as fast as text.
  std::string ir;
  {
    llvm::raw_string_ostream irStream(ir);
    if (failed(writeBytecodeToFile(*module, irStream)))
      return emitError(module->getLoc(), "cannot write the imported module");
  }
  MlirOptMainConfig chunkConfig = config;
  chunkConfig.splitInputFile("");
  return MlirOptMain(
      os,
      llvm::MemoryBuffer::getMemBufferCopy(ir, buffer.getBufferIdentifier()),
      registry, chunkConfig);
}

} // namespace

LogicalResult monarch::traceOptMain(int argc, char **argv, StringRef toolName,
                                    DialectRegistry &registry) {
  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, toolName, registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  // --show-dialects and --list-passes print and stop before any input.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return MlirOptMain(argc, argv, inputFilename, outputFilename, registry);

  llvm::InitLLVM init(argc, argv);
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << errorMessage << "\n";
    return failure();
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return failure();
  }

  TraceFormat format = traceFormatOf(*input);
  LogicalResult result = success();
  if (format == TraceFormat::None) {
    // Text that would crash the upstream parser (ParserGuards.h) is an
    // error before anything is parsed, in whichever chunk it is.
    if (failed(rejectParserCrashSyntax(*input, llvm::errs())))
      return failure();
    result = MlirOptMain(output->os(), std::move(input), registry, config);
  } else {
    // Only text splits: a binary trace is one program whatever its bytes.
    StringRef marker = format == TraceFormat::Text
                           ? std::as_const(config).inputSplitMarker()
                           : "";
    auto process = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                       raw_ostream &os) {
      return processTrace(std::move(chunk), format, os, registry, config);
    };
    result = splitAndProcessBuffer(
        std::move(input), NoSourceChunkBufferHandler(process), output->os(),
        marker, std::as_const(config).outputSplitMarker());
  }
  if (failed(result))
    return failure();
  output->keep();
  return success();
}
