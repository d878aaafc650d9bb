//===- PlanCompiler.cpp - How monarch-run compiles a .mlir file -----------===//

#include "PlanCompiler.h"

namespace monarch::run {

bool hasInProcessCompiler() {
#ifdef MONARCH_RUN_HAS_COMPILER
  return true;
#else
  return false;
#endif
}

tensor::Expected<PlanCompiler>
choosePlanCompiler(const std::string &monarchOptFlag,
                   const ExternalCompileOptions &external) {
#ifdef MONARCH_RUN_HAS_COMPILER
  if (monarchOptFlag.empty())
    return PlanCompiler([](const std::string &path,
                           const CompileOptions &options) {
      return compileFileToPlan(path, options);
    });
#endif
  auto opt = findMonarchOpt(monarchOptFlag);
  if (!opt.ok()) {
    if (!monarchOptFlag.empty())
      return opt.status();
    return tensor::Status(
        ErrorCode::NotFound,
        "this monarch-run was built without the compiler, and " +
            opt.status().message() +
            ": pass --monarch-opt PATH or set $MONARCH_OPT (a "
            "monarch-opt-static carried from a machine with MLIR), or run a "
            "plan compiled elsewhere (monarch-run PROGRAM.mlir --emit-plan "
            "PROGRAM.plan)");
  }
  return PlanCompiler([opt = *opt, external](const std::string &path,
                                             const CompileOptions &options) {
    return compileFileToPlanExternal(opt, path, options, external);
  });
}

} // namespace monarch::run
