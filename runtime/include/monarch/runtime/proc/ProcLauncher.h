//===- ProcLauncher.h - Starting worker processes ---------------*- C++ -*-===//
//
// The seam between proc meshes and the way processes come to exist. The
// local launcher fork/execs the worker binary; a host agent (multi-host) will
// implement the same interface over TCP. The bootstrap -- proc id, parent
// address and the job secret -- is handed over out of band (a pipe for the
// local launcher), never on the command line.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_PROCLAUNCHER_H
#define MONARCH_RUNTIME_PROC_PROCLAUNCHER_H

#include "monarch/runtime/util/Status.h"

#include "runtime.pb.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace asio {
class io_context;
}

namespace monarch {

/// Where a child's output lines go instead of this process's stdout/stderr:
/// complete lines (without '\n') of one read, in order, on the io thread.
using ProcLogSink =
    std::function<void(bool isStderr, std::vector<std::string> &&lines)>;

/// Prints a proc's output lines as "[prefix] line" on stderr or stdout and
/// flushes: how a launcher without a sink, an agent without a controller and
/// the controller itself all show them.
template <typename Lines>
void printProcLines(bool isStderr, const std::string &prefix,
                    const Lines &lines) {
  FILE *out = isStderr ? stderr : stdout;
  for (const auto &line : lines)
    std::fprintf(out, "[%s] %s\n", prefix.c_str(), line.c_str());
  std::fflush(out);
}

struct ProcLaunchSpec {
  proto::Bootstrap bootstrap;
  std::string workerPath;
  /// Arguments after argv[0] (e.g. the script of an interpreter).
  std::vector<std::string> args;
  /// Set in the child's environment on top of this process's.
  std::vector<std::pair<std::string, std::string>> env;
  /// Prefix of forwarded log lines, e.g. "procs rank 3".
  std::string logPrefix;
  /// Default: lines printed here as "[logPrefix] line".
  ProcLogSink logSink;
};

/// A running (or exited) proc. Destroying it kills the process.
class LaunchedProc {
public:
  virtual ~LaunchedProc() = default;
  virtual int pid() const = 0;
  /// Runs once with a description of how the process ended ("exited with
  /// code 3", "killed by signal 9 (Killed)"), on the io thread, after its
  /// last output line was forwarded (or a second after it ended, when
  /// something else still holds its stdout/stderr open).
  virtual void onExit(std::function<void(const std::string &)> handler) = 0;
  virtual bool hasExited() const = 0;
  virtual bool waitExited(std::chrono::milliseconds timeout) = 0;
  virtual void kill(int signal) = 0;
};

class ProcLauncher {
public:
  virtual ~ProcLauncher() = default;
  virtual Expected<std::unique_ptr<LaunchedProc>>
  launch(const ProcLaunchSpec &spec) = 0;
};

/// fork/exec on this machine. Children get PR_SET_PDEATHSIG(SIGKILL), so they
/// die with this process: every fork is made on one thread that lives as
/// long as the process (the signal follows the forking thread), whichever
/// thread asks for the launch. Their stdout/stderr are forwarded line by
/// line with the rank prefix.
class LocalProcLauncher : public ProcLauncher {
public:
  explicit LocalProcLauncher(asio::io_context &io) : io(io) {}
  Expected<std::unique_ptr<LaunchedProc>>
  launch(const ProcLaunchSpec &spec) override;

private:
  asio::io_context &io;
};

/// How many procs the local launcher of this process may run at once: one
/// input (a plan of 100,000 ranks, spawn_procs({"gpu": 100000})) must not
/// fork without bound and exhaust the host. $MONARCH_MAX_PROCS_PER_HOST
/// sets it; the default comes from the host: the smallest of
/// max(64, 8 x cores), physical memory / 64 MiB (a worker with libtorch
/// loaded holds ~100 MB) and (open-file limit - 64) / 6 (each local proc
/// costs its parent 5 descriptors: two output pipes, a pidfd, a link and the
/// connection it opened back).
struct ProcLimit {
  int64_t max = 0;
  std::string basis; ///< how it was chosen, for error messages
};
ProcLimit localProcLimit();
/// Procs the local launcher started that are still running.
int64_t liveLocalProcs();
/// Ok when `more` procs fit beside the running ones; else an Exhausted
/// error naming the limit, its basis and the knob.
Status checkLocalProcRoom(int64_t more);

/// Closes every file descriptor from `lowest` up. Async-signal-safe: for a
/// child between fork and exec, so that it inherits its stdio (and the
/// bootstrap pipe) only, never the parent's sockets, pidfds or files,
/// whichever library opened them and whether or not they are close-on-exec.
void closeDescriptorsFrom(int lowest);

/// SIGKILLs and reaps every process the local launcher started that is still
/// running (used when the controller fails; normally meshes stop their own).
void killAllLocalProcs();

/// The running program's own executable, for programs that serve as their
/// own workers (`if (isWorkerProcess()) return runWorker();` first in main).
std::string currentExecutable();

/// The worker binary: $MONARCH_WORKER_PATH, else monarch-worker beside this
/// executable, else the path it was built at.
std::string locateWorkerBinary();

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_PROCLAUNCHER_H
