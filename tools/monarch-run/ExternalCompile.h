//===- ExternalCompile.h - .mlir to plan by running monarch-opt -*- C++ -*-===//
//
//   auto opt = run::findMonarchOpt(args.monarchOpt);       // path or error
//   CompileResult r = run::compileFileToPlanExternal(*opt, "prog.mlir", options);
//
// The second implementation of monarch-run's compile seam: the same
// CompileOptions in and CompileResult out as the in-process
// monarch::compileFileToPlan (compiler/include/monarch/Compiler/Driver/
// CompileToPlan.h), done by a monarch-opt subprocess. A monarch-run built
// without the compiler (the GPU machine: no MLIR there, DESIGN.md §3) uses it
// to run .mlir files with a self-contained monarch-opt-static carried from a
// machine with MLIR; `--monarch-opt PATH` forces it in any build, which is how
// it is tested against the in-process compile.
//
// monarchOptArguments is the whole contract: parse + verify, the same
// textual pipeline the in-process compile parses
// ("monarch-default-pipeline{OPTS}", or "monarch-verify-borrows" with
// --no-optimize), then --monarch-emit-plan with the same entry, threading off
// and no op dump on diagnostics as in-process. The plan is byte-identical;
// the diagnostics are the same text (both print through MLIR's
// SourceMgrDiagnosticHandler).
//
// The plan and monarch-opt's output go to a private directory
// (tensor::TempDir, removed with nftw: std::filesystem crashes in processes
// that load torch 2.x, docs/building.md) that is removed on every path:
// success, compile error, timeout (monarch-opt is killed), failure to start
// it, and SIGINT/SIGTERM/SIGHUP during the compile (monarch-opt is killed,
// the directory removed, then the signal re-raised). The subprocess starts
// with posix_spawn, stdin from /dev/null, stdout and stderr captured, and no
// other descriptor of ours (every fd we open is O_CLOEXEC, and the rest are
// closed in the child where glibc can).
//
// compileFileToPlanExternal blocks those signals in the calling thread while
// monarch-opt runs: call it before starting threads that do not block them
// (monarch-run compiles before it starts the controller).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TOOLS_MONARCH_RUN_EXTERNALCOMPILE_H
#define MONARCH_TOOLS_MONARCH_RUN_EXTERNALCOMPILE_H

#include "monarch/Compiler/Driver/CompileToPlan.h"
#include "monarch/tensor/Status.h"

#include <chrono>
#include <string>
#include <vector>

namespace monarch::run {

/// The monarch-opt to run, the first of: `flag` (--monarch-opt PATH),
/// $MONARCH_OPT, monarch-opt-static or monarch-opt beside this executable
/// (/proc/self/exe), monarch-opt-static or monarch-opt on $PATH. A given flag
/// or $MONARCH_OPT that is not an executable file is an error (not skipped:
/// the user asked for that one); the NotFound error lists where it looked.
tensor::Expected<std::string> findMonarchOpt(const std::string &flag);

/// The arguments after argv[0] that make monarch-opt compile `input` exactly
/// as compileFileToPlan does, writing the binary plan to `planPath`. Invalid
/// if the entry or the plan path cannot be quoted as a pass option (a value
/// holding both ' and ").
tensor::Expected<std::vector<std::string>>
monarchOptArguments(const std::string &input, const CompileOptions &options,
                    const std::string &planPath);

struct ExternalCompileOptions {
  /// monarch-opt is killed after this long (the compile then fails).
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
};

/// Compiles `path` with the monarch-opt at `monarchOpt`. ok: `plan` holds the
/// serialized plan and `diagnostics` what monarch-opt printed (warnings);
/// otherwise `diagnostics` holds monarch-opt's diagnostics, followed by a line
/// saying why it failed when that is not a compile error (killed, timed out,
/// could not start, wrote no plan).
CompileResult
compileFileToPlanExternal(const std::string &monarchOpt,
                          const std::string &path,
                          const CompileOptions &options,
                          const ExternalCompileOptions &external = {});

} // namespace monarch::run

#endif // MONARCH_TOOLS_MONARCH_RUN_EXTERNALCOMPILE_H
