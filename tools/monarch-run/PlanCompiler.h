//===- PlanCompiler.h - How monarch-run compiles a .mlir file ---*- C++ -*-===//
//
//   auto compile = run::choosePlanCompiler(args.monarchOpt, external);
//   if (!compile.ok()) ...;                     // no compiler at all
//   CompileResult r = (*compile)("prog.mlir", options);
//
// monarch-run's compile seam. Two implementations return the same
// CompileResult for the same CompileOptions: the in-process
// monarch::compileFileToPlan, linked when monarch-run is built with the
// compiler (MONARCH_RUN_HAS_COMPILER), and a monarch-opt subprocess
// (ExternalCompile.h), the only one in a build without MLIR (the GPU machine).
// --monarch-opt PATH chooses the subprocess in either build. This file's
// implementation is the one place that knows which build it is in.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TOOLS_MONARCH_RUN_PLANCOMPILER_H
#define MONARCH_TOOLS_MONARCH_RUN_PLANCOMPILER_H

#include "ExternalCompile.h"

#include <functional>
#include <string>

namespace monarch::run {

using PlanCompiler =
    std::function<CompileResult(const std::string &, const CompileOptions &)>;

/// True when monarch-run links the compiler.
bool hasInProcessCompiler();

/// `monarchOptFlag` set: that monarch-opt (an error if it is not
/// executable). Otherwise the in-process compiler when linked, else the
/// monarch-opt findMonarchOpt finds; NotFound (saying where it looked and what
/// to do) when there is none.
tensor::Expected<PlanCompiler>
choosePlanCompiler(const std::string &monarchOptFlag,
                   const ExternalCompileOptions &external);

} // namespace monarch::run

#endif // MONARCH_TOOLS_MONARCH_RUN_PLANCOMPILER_H
