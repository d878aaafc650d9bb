//===- ExternalCompile.cpp - .mlir to plan by running monarch-opt ---------===//

#include "ExternalCompile.h"

#include "monarch/runtime/proc/ProcLauncher.h"
#include "monarch/tensor/TempDir.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <spawn.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace monarch::run {

namespace {

bool isExecutableFile(const std::string &path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 &&
         S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string dirOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The two names, the self-contained one first: beside a build's monarch-run
// both exist and they compile the same; on the GPU machine only the static one
// is there.
const char *const kNames[] = {"monarch-opt-static", "monarch-opt"};

/// A pass option value that MLIR's option parser reads back verbatim: bare
/// when it has nothing the parser splits on, else quoted (the parser strips
/// the quotes).
tensor::Expected<std::string> optionValue(const std::string &what,
                                          const std::string &value) {
  if (!value.empty() && value.find_first_of(" \t\n{}[]()<>'\",=") ==
                            std::string::npos)
    return value;
  if (value.find('"') == std::string::npos)
    return "\"" + value + "\"";
  if (value.find('\'') == std::string::npos)
    return "'" + value + "'";
  return tensor::Status(ErrorCode::Invalid,
                        what + " '" + value +
                            "' holds both ' and \": monarch-opt's option "
                            "syntax cannot quote it");
}

/// The whole file; false if it cannot be opened or read.
bool readFile(const std::string &path, std::string &bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  bytes.assign(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
  return !in.bad();
}

/// The signals that end monarch-run while monarch-opt runs, taken with
/// sigtimedwait so that monarch-opt is killed and the directory removed
/// first. One the caller ignores (nohup's SIGHUP) stays ignored, and is
/// neither waited for nor blocked.
sigset_t terminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current;
    if (sigaction(sig, nullptr, &current) == 0 &&
        current.sa_handler != SIG_IGN)
      sigaddset(&set, sig);
  }
  return set;
}

/// What one monarch-opt run left behind: its exit status, how it ended.
struct Outcome {
  CompileResult result;
  /// A termination signal taken during the run, re-raised by the caller once
  /// the directory is gone.
  int pendingSignal = 0;
};

/// Owns the descriptors and spawn objects of one run, closing them on every
/// return.
struct SpawnResources {
  int nullFd = -1;
  int logFd = -1;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  bool haveActions = false;
  bool haveAttr = false;
  ~SpawnResources() {
    if (haveActions)
      posix_spawn_file_actions_destroy(&actions);
    if (haveAttr)
      posix_spawnattr_destroy(&attr);
    if (nullFd >= 0)
      ::close(nullFd);
    if (logFd >= 0)
      ::close(logFd);
  }
};

Outcome runIn(const tensor::TempDir &dir, const std::string &monarchOpt,
              const std::string &path, const CompileOptions &options,
              const ExternalCompileOptions &external,
              const sigset_t &callerMask, const sigset_t &wake) {
  Outcome out;
  CompileResult &result = out.result;
  std::string planPath = dir.file("program.plan");
  std::string logPath = dir.file("monarch-opt.log");
  auto args = monarchOptArguments(path, options, planPath);
  if (!args.ok()) {
    result.diagnostics = "error: " + args.status().message() + "\n";
    return out;
  }
  std::vector<std::string> argvStrings = {monarchOpt};
  argvStrings.insert(argvStrings.end(), args->begin(), args->end());
  std::vector<char *> argv;
  for (auto &a : argvStrings)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  auto fail = [&](const std::string &why) {
    result.diagnostics = "error: " + why + "\n";
    return out;
  };
  SpawnResources res;
  res.nullFd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  res.logFd = ::open(logPath.c_str(),
                     O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (res.nullFd < 0 || res.logFd < 0)
    return fail("cannot create " + logPath + ": " + std::strerror(errno));
  if (posix_spawn_file_actions_init(&res.actions) != 0)
    return fail("posix_spawn_file_actions_init failed");
  res.haveActions = true;
  // stdout too goes to the log: monarch-run's stdout carries fetched values.
  posix_spawn_file_actions_adddup2(&res.actions, res.nullFd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&res.actions, res.logFd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&res.actions, res.logFd, STDERR_FILENO);
#if defined(__GLIBC__) &&                                                      \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Descriptors we did not open (inherited without O_CLOEXEC) stay ours too.
  posix_spawn_file_actions_addclosefrom_np(&res.actions, 3);
#endif
  if (posix_spawnattr_init(&res.attr) != 0)
    return fail("posix_spawnattr_init failed");
  res.haveAttr = true;
  // monarch-opt starts with the caller's mask, not the one blocking the
  // termination signals here. Dispositions: handlers are reset by exec and
  // what the caller ignores stays ignored (as for any child), but SIGPIPE
  // gets its default, which monarch-opt's output code expects.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&res.attr, &callerMask);
  posix_spawnattr_setsigdefault(&res.attr, &defaults);
  posix_spawnattr_setflags(&res.attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  if (int rc = ::posix_spawn(&pid, monarchOpt.c_str(), &res.actions,
                             &res.attr, argv.data(), environ))
    return fail("cannot run " + monarchOpt + ": " + std::strerror(rc));

  auto deadline = std::chrono::steady_clock::now() + external.timeout;
  int status = 0;
  bool timedOut = false;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid)
      break;
    if (done < 0 && errno != EINTR)
      return fail("waiting for " + monarchOpt + ": " + std::strerror(errno));
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      timedOut = true;
    } else {
      // SIGCHLD wakes this at once; the bound is only for the deadline.
      auto ns = std::min<std::chrono::nanoseconds>(
          left, std::chrono::milliseconds(200));
      struct timespec ts = {static_cast<time_t>(ns.count() / 1000000000),
                            static_cast<long>(ns.count() % 1000000000)};
      int sig = ::sigtimedwait(&wake, nullptr, &ts);
      if (sig == SIGCHLD || sig < 0)
        continue;
      out.pendingSignal = sig;
    }
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    break;
  }

  std::string log;
  readFile(logPath, log);
  if (!log.empty() && log.back() != '\n')
    log += "\n";
  result.diagnostics = log;
  if (out.pendingSignal) {
    result.diagnostics += "error: interrupted (" +
                          std::string(strsignal(out.pendingSignal)) +
                          "); killed " + monarchOpt + "\n";
    return out;
  }
  if (timedOut) {
    result.diagnostics +=
        "error: " + monarchOpt + " did not finish within " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                           external.timeout)
                           .count()) +
        " s; killed it\n";
    return out;
  }
  if (WIFSIGNALED(status)) {
    result.diagnostics += "error: " + monarchOpt + " was killed by signal " +
                          std::to_string(WTERMSIG(status)) + " (" +
                          strsignal(WTERMSIG(status)) + ")\n";
    return out;
  }
  if (WEXITSTATUS(status) != 0) {
    // A compile error: monarch-opt's diagnostics say it all, as in-process.
    if (log.empty())
      result.diagnostics = "error: " + monarchOpt + " exited with status " +
                           std::to_string(WEXITSTATUS(status)) +
                           " and printed nothing\n";
    return out;
  }
  if (!readFile(planPath, result.plan)) {
    result.plan.clear();
    result.diagnostics +=
        "error: " + monarchOpt + " exited with status 0 but wrote no plan\n";
    return out;
  }
  result.ok = true;
  return out;
}

} // namespace

tensor::Expected<std::string> findMonarchOpt(const std::string &flag) {
  if (!flag.empty()) {
    if (isExecutableFile(flag))
      return flag;
    return tensor::Status(ErrorCode::NotFound,
                          "--monarch-opt " + flag + ": not an executable file");
  }
  if (const char *env = std::getenv("MONARCH_OPT"); env && *env) {
    if (isExecutableFile(env))
      return std::string(env);
    return tensor::Status(ErrorCode::NotFound, std::string("$MONARCH_OPT (") +
                                                   env +
                                                   ") is not an executable file");
  }
  std::vector<std::string> tried;
  std::string self = currentExecutable();
  if (!self.empty()) {
    for (const char *name : kNames) {
      std::string beside = dirOf(self) + "/" + name;
      if (isExecutableFile(beside))
        return beside;
    }
    tried.push_back("monarch-opt-static and monarch-opt in " + dirOf(self));
  }
  if (const char *pathEnv = std::getenv("PATH"); pathEnv && *pathEnv) {
    std::stringstream dirs(pathEnv);
    for (std::string d; std::getline(dirs, d, ':');) {
      for (const char *name : kNames) {
        std::string candidate = (d.empty() ? "." : d) + "/" + name;
        if (isExecutableFile(candidate))
          return candidate;
      }
    }
    tried.push_back("$PATH");
  }
  std::string where = "--monarch-opt, $MONARCH_OPT";
  for (const auto &t : tried)
    where += ", " + t;
  return tensor::Status(ErrorCode::NotFound,
                        "no monarch-opt found (looked at " + where + ")");
}

tensor::Expected<std::vector<std::string>>
monarchOptArguments(const std::string &input, const CompileOptions &options,
                    const std::string &planPath) {
  auto output = optionValue("the plan path", planPath);
  if (!output.ok())
    return output.status();
  std::string emit = "monarch-emit-plan{output=" + *output;
  if (!options.entry.empty()) {
    auto entry = optionValue("--entry", options.entry);
    if (!entry.ok())
      return entry.status();
    emit += " entry=" + *entry;
  }
  emit += "}";
  // The very text compileFileToPlan parses (its pass manager is anchored on
  // builtin.module), then the lowering as a pass.
  std::string pipeline =
      options.optimize
          ? "monarch-default-pipeline{" + options.pipelineOptions + "}"
          : std::string("monarch-verify-borrows");
  return std::vector<std::string>{
      input,
      // As in-process: one thread, diagnostics without a dump of the op.
      "--mlir-disable-threading",
      "--mlir-print-op-on-diagnostic=false",
      "--pass-pipeline=builtin.module(" + pipeline + "," + emit + ")",
      // The IR itself is not wanted; bytecode is the cheapest to discard
      // (a fifth of the cost of printing text).
      "--emit-bytecode",
      "-o",
      "/dev/null",
  };
}

CompileResult compileFileToPlanExternal(const std::string &monarchOpt,
                                        const std::string &path,
                                        const CompileOptions &options,
                                        const ExternalCompileOptions &external) {
  // Termination signals (and SIGCHLD, to wake up when monarch-opt exits) are
  // taken synchronously while it runs. SIGCHLD must not be ignored, or the
  // kernel reaps monarch-opt before waitpid sees its status.
  sigset_t block = terminationSignals(), callerMask;
  sigaddset(&block, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &block, &callerMask);
  struct sigaction childAction, oldChildAction;
  std::memset(&childAction, 0, sizeof(childAction));
  childAction.sa_handler = SIG_DFL;
  sigemptyset(&childAction.sa_mask);
  sigaction(SIGCHLD, nullptr, &oldChildAction);
  bool restoreChild = oldChildAction.sa_handler == SIG_IGN;
  if (restoreChild)
    sigaction(SIGCHLD, &childAction, nullptr);

  Outcome out;
  {
    tensor::TempDir dir("compile");
    out = runIn(dir, monarchOpt, path, options, external, callerMask, block);
  } // the directory is removed here, on every path

  if (restoreChild)
    sigaction(SIGCHLD, &oldChildAction, nullptr);
  // A SIGCHLD of monarch-opt's exit may still be pending: delivered now, as
  // any SIGCHLD may be spurious to a handler (signals coalesce).
  pthread_sigmask(SIG_SETMASK, &callerMask, nullptr);
  if (out.pendingSignal)
    ::raise(out.pendingSignal); // its default action ends monarch-run here
  return out.result;
}

} // namespace monarch::run
