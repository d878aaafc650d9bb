#include "monarch/runtime/proc/ProcLauncher.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <asio.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <deque>
#include <functional>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <thread>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

extern char **environ;

namespace monarch {

namespace {

constexpr int kBootstrapFd = 3;

std::mutex liveMu;
std::set<pid_t> &livePids() {
  static std::set<pid_t> pids;
  return pids;
}

std::string describeStatus(int status) {
  if (WIFEXITED(status))
    return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *name = strsignal(sig);
    return "killed by signal " + std::to_string(sig) + " (" +
           (name ? name : "?") + ")";
  }
  return "ended with status " + std::to_string(status);
}

/// Forwards one pipe of a child line by line: to `sink`, or printed with the
/// prefix. `closed` runs once the pipe reached its end.
class LogForwarder : public std::enable_shared_from_this<LogForwarder> {
public:
  LogForwarder(asio::io_context &io, int fd, bool isStderr, std::string prefix,
               ProcLogSink sink, std::function<void()> closed)
      : pipe(io, fd), isStderr(isStderr), prefix(std::move(prefix)),
        sink(std::move(sink)), closed(std::move(closed)) {}

  void start() {
    auto self = shared_from_this();
    pipe.async_read_some(
        asio::buffer(chunk), [self](asio::error_code ec, size_t n) {
          self->pending.append(self->chunk, n);
          std::vector<std::string> lines;
          size_t from = 0, at;
          while ((at = self->pending.find('\n', from)) != std::string::npos) {
            lines.push_back(self->pending.substr(from, at - from));
            from = at + 1;
          }
          self->pending.erase(0, from);
          if (ec && !self->pending.empty()) {
            lines.push_back(std::move(self->pending));
            self->pending.clear();
          }
          if (!lines.empty())
            self->emit(std::move(lines));
          if (ec) {
            self->closed();
            return;
          }
          self->start();
        });
  }

private:
  void emit(std::vector<std::string> &&lines) {
    if (sink) {
      sink(isStderr, std::move(lines));
      return;
    }
    printProcLines(isStderr, prefix, lines);
  }

  asio::posix::stream_descriptor pipe;
  bool isStderr;
  std::string prefix;
  ProcLogSink sink;
  std::function<void()> closed;
  char chunk[4096];
  std::string pending;
};

/// Watches a pidfd; reaps the child when it becomes readable and reports
/// the exit once its output pipes are drained, so that a proc's last lines
/// come before news of its end.
class ExitWatch : public std::enable_shared_from_this<ExitWatch> {
public:
  /// How long an exit report waits for output still held open by others
  /// (e.g. a grandchild that inherited stdout).
  static constexpr std::chrono::seconds kDrainBound{1};

  ExitWatch(asio::io_context &io, int pid, int pidfd, int streams)
      : pid(pid), fd(io, pidfd), drainTimer(io), openStreams(streams) {}

  void start() {
    auto self = shared_from_this();
    fd.async_wait(asio::posix::stream_descriptor::wait_read,
                  [self](asio::error_code ec) {
                    if (ec == asio::error::operation_aborted)
                      return;
                    self->reap();
                  });
  }

  /// One output pipe reached its end (io thread).
  void streamClosed() {
    if (--openStreams == 0 && reaped) {
      drainTimer.cancel();
      finish();
    }
  }

  void onExit(std::function<void(const std::string &)> handler) {
    std::unique_lock<std::mutex> lock(mu);
    if (!exited) {
      handlers.push_back(std::move(handler));
      return;
    }
    std::string what = description;
    lock.unlock();
    handler(what);
  }
  bool hasExited() {
    std::lock_guard<std::mutex> guard(mu);
    return exited;
  }
  bool waitExited(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return exited; });
  }

private:
  void reap() {
    int status = 0;
    pid_t got;
    do {
      got = ::waitpid(pid, &status, 0);
    } while (got < 0 && errno == EINTR);
    {
      std::lock_guard<std::mutex> guard(liveMu);
      livePids().erase(pid);
    }
    reapedHow = got == pid ? describeStatus(status) : "exited";
    reaped = true;
    asio::error_code ignored;
    fd.close(ignored);
    if (openStreams == 0) {
      finish();
      return;
    }
    drainTimer.expires_after(kDrainBound);
    drainTimer.async_wait(
        [self = shared_from_this()](asio::error_code) { self->finish(); });
  }

  void finish() {
    std::vector<std::function<void(const std::string &)>> toRun;
    {
      std::lock_guard<std::mutex> guard(mu);
      if (exited)
        return;
      exited = true;
      description = reapedHow;
      toRun.swap(handlers);
    }
    cv.notify_all();
    for (auto &h : toRun)
      h(reapedHow);
  }

  int pid;
  asio::posix::stream_descriptor fd;
  asio::steady_timer drainTimer;
  // io thread only:
  int openStreams;
  bool reaped = false;
  std::string reapedHow;

  std::mutex mu;
  std::condition_variable cv;
  bool exited = false;
  std::string description;
  std::vector<std::function<void(const std::string &)>> handlers;
};

class LocalProc : public LaunchedProc {
public:
  LocalProc(int pid, std::shared_ptr<ExitWatch> watch)
      : processId(pid), watch(std::move(watch)) {}
  ~LocalProc() override {
    if (!watch->hasExited()) {
      ::kill(processId, SIGKILL);
      // On the io thread the watch reaps it later; waiting here would block
      // the very thread that reaps.
      if (!Runtime::onIoThread() && !watch->waitExited(std::chrono::seconds(5)))
        log::error("process ", processId, " did not exit after SIGKILL");
    }
  }
  int pid() const override { return processId; }
  void onExit(std::function<void(const std::string &)> handler) override {
    watch->onExit(std::move(handler));
  }
  bool hasExited() const override { return watch->hasExited(); }
  bool waitExited(std::chrono::milliseconds timeout) override {
    return watch->waitExited(timeout);
  }
  void kill(int signal) override {
    if (!watch->hasExited())
      ::kill(processId, signal);
  }

private:
  int processId;
  std::shared_ptr<ExitWatch> watch;
};

/// Forks on one thread that lives as long as the process. A child's
/// PR_SET_PDEATHSIG fires when the *thread* that forked it ends, not the
/// process: a proc forked from a short-lived thread (a Python actor's
/// endpoint thread, a pytest worker's, a callback's) was SIGKILLed as soon
/// as that thread returned, its mesh reporting "killed by signal 9". Here
/// every fork is made by this thread, so a child dies with the process only.
/// `child` runs in the new process between fork and exec (async-signal-safe
/// calls only) and must not return; the caller's data it uses stays valid
/// since the caller waits for the fork.
class ForkThread {
public:
  static ForkThread &get() {
    // Never destroyed: static destructors at exit must not join it.
    static ForkThread *thread = new ForkThread();
    return *thread;
  }

  pid_t fork(const std::function<void()> &child) {
    std::unique_lock<std::mutex> lock(mu);
    Request request{&child};
    queue.push_back(&request);
    wake.notify_all();
    done.wait(lock, [&] { return request.finished; });
    errno = request.error;
    return request.pid;
  }

private:
  struct Request {
    const std::function<void()> *child;
    pid_t pid = -1;
    int error = 0;
    bool finished = false;
  };

  ForkThread() {
    std::thread([this] { serve(); }).detach();
  }

  void serve() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      wake.wait(lock, [&] { return !queue.empty(); });
      Request *request = queue.front();
      queue.pop_front();
      pid_t pid = ::fork();
      if (pid == 0) {
        (*request->child)();
        ::_exit(127);
      }
      request->pid = pid;
      request->error = pid < 0 ? errno : 0;
      request->finished = true;
      done.notify_all();
    }
  }

  std::mutex mu;
  std::condition_variable wake, done;
  std::deque<Request *> queue;
};

/// A close-on-exec pipe whose ends are closed when it goes out of scope,
/// unless handed on (release): every early return of a launch closes what
/// it opened.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() = default;
  Pipe(const Pipe &) = delete;
  Pipe &operator=(const Pipe &) = delete;
  ~Pipe() {
    close(0);
    close(1);
  }
  bool open() { return ::pipe2(fd, O_CLOEXEC) == 0; }
  void close(int end) {
    if (fd[end] >= 0)
      ::close(fd[end]);
    fd[end] = -1;
  }
  int release(int end) { return std::exchange(fd[end], -1); }
};

Status errnoStatus(const std::string &what) {
  return Status(ErrorCode::Internal, what + ": " + std::strerror(errno));
}

} // namespace

void closeDescriptorsFrom(int lowest) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(lowest), ~0U, 0) == 0)
    return;
#endif
  rlimit limit{};
  long max = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY)
    max = static_cast<long>(std::min<rlim_t>(limit.rlim_cur, 1u << 20));
  for (long fd = lowest; fd < max; ++fd)
    ::close(static_cast<int>(fd));
}

ProcLimit localProcLimit() {
  ProcLimit limit;
  if (const char *env = std::getenv("MONARCH_MAX_PROCS_PER_HOST"); env && *env) {
    char *end = nullptr;
    long long v = std::strtoll(env, &end, 10);
    if (*end == '\0' && v > 0) {
      limit.max = v;
      limit.basis = "$MONARCH_MAX_PROCS_PER_HOST";
      return limit;
    }
    log::warning("ignoring $MONARCH_MAX_PROCS_PER_HOST='", env,
                 "' (not a positive number)");
  }
  int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  int64_t byCores = std::max<int64_t>(64, 8 * cores);
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  int64_t memory = pages > 0 && pageSize > 0
                       ? static_cast<int64_t>(pages) * pageSize
                       : int64_t{1} << 40;
  int64_t byMemory = std::max<int64_t>(1, memory / (int64_t{64} << 20));
  rlimit files{};
  int64_t byFiles = INT64_MAX;
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 &&
      files.rlim_cur != RLIM_INFINITY)
    byFiles = std::max<int64_t>(1, (static_cast<int64_t>(files.rlim_cur) - 64) / 6);
  limit.max = std::min({byCores, byMemory, byFiles});
  limit.basis = "the default for " + std::to_string(cores) + " cores, " +
                std::to_string(memory >> 20) + " MiB of memory" +
                (byFiles == INT64_MAX
                     ? std::string()
                     : " and " + std::to_string(files.rlim_cur) +
                           " file descriptors");
  return limit;
}

int64_t liveLocalProcs() {
  std::lock_guard<std::mutex> guard(liveMu);
  return static_cast<int64_t>(livePids().size());
}

Status checkLocalProcRoom(int64_t more) {
  ProcLimit limit = localProcLimit();
  int64_t live = liveLocalProcs();
  if (more <= limit.max - live)
    return Status::ok();
  return Status(ErrorCode::Exhausted,
                std::to_string(more) + " more procs on this host would exceed " +
                    "its limit of " + std::to_string(limit.max) +
                    " procs at once (" + std::to_string(live) +
                    " running; the limit is " + limit.basis +
                    "); set MONARCH_MAX_PROCS_PER_HOST to change it");
}

Expected<std::unique_ptr<LaunchedProc>>
LocalProcLauncher::launch(const ProcLaunchSpec &spec) {
  // Checked again here, for every fork, whoever asks (a mesh, an agent).
  if (Status room = checkLocalProcRoom(1); !room.isOk())
    return room;
  if (::access(spec.workerPath.c_str(), X_OK) != 0)
    return Status(ErrorCode::NotFound,
                  "worker binary not executable: " + spec.workerPath);
  std::string boot;
  if (!spec.bootstrap.SerializeToString(&boot))
    return Status(ErrorCode::Internal, "cannot serialize the bootstrap");
  // The bootstrap is small; it fits in the pipe buffer before the child runs.
  if (boot.size() > 60000)
    return Status(ErrorCode::Invalid, "bootstrap too large");
  Pipe bootPipe, outPipe, errPipe;
  if (!bootPipe.open() || !outPipe.open() || !errPipe.open())
    return errnoStatus("pipe");
  if (::write(bootPipe.fd[1], boot.data(), boot.size()) !=
      static_cast<ssize_t>(boot.size()))
    return errnoStatus("write bootstrap");
  bootPipe.close(1);

  // Everything the child needs is prepared before fork: between fork and exec
  // only async-signal-safe calls are allowed.
  std::vector<std::pair<std::string, std::string>> extra = spec.env;
  extra.emplace_back("MONARCH_BOOTSTRAP_FD", std::to_string(kBootstrapFd));
  auto overridden = [&](const char *entry) {
    for (const auto &[key, value] : extra)
      if (std::strncmp(entry, key.c_str(), key.size()) == 0 &&
          entry[key.size()] == '=')
        return true;
    return false;
  };
  std::vector<std::string> envStrings;
  for (char **e = environ; *e; ++e)
    if (!overridden(*e))
      envStrings.emplace_back(*e);
  for (const auto &[key, value] : extra)
    envStrings.push_back(key + "=" + value);
  std::vector<char *> envp;
  for (auto &s : envStrings)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string path = spec.workerPath;
  std::vector<std::string> args = spec.args;
  std::vector<char *> argv = {path.data()};
  for (auto &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t parent = ::getpid();

  pid_t pid = ForkThread::get().fork([&] {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(1); // the parent died before prctl took effect
    int fds[3][2] = {{bootPipe.fd[0], kBootstrapFd},
                     {outPipe.fd[1], STDOUT_FILENO},
                     {errPipe.fd[1], STDERR_FILENO}};
    for (auto &f : fds) {
      if (f[0] == f[1])
        ::fcntl(f[0], F_SETFD, 0);
      else if (::dup2(f[0], f[1]) < 0)
        ::_exit(126);
    }
    closeDescriptorsFrom(kBootstrapFd + 1);
    ::execve(path.c_str(), argv.data(), envp.data());
    ::_exit(127);
  });
  if (pid < 0)
    return errnoStatus("fork");
  bootPipe.close(0);
  outPipe.close(1);
  errPipe.close(1);

  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    Status failed = errnoStatus("pidfd_open");
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return failed;
  }
  {
    std::lock_guard<std::mutex> guard(liveMu);
    livePids().insert(pid);
  }
  auto watch = std::make_shared<ExitWatch>(io, pid, pidfd, 2);
  auto closed = [watch] { watch->streamClosed(); };
  auto out = std::make_shared<LogForwarder>(
      io, outPipe.release(0), false, spec.logPrefix, spec.logSink, closed);
  auto err = std::make_shared<LogForwarder>(
      io, errPipe.release(0), true, spec.logPrefix, spec.logSink, closed);
  asio::post(io, [watch, out, err] {
    watch->start();
    out->start();
    err->start();
  });
  return std::unique_ptr<LaunchedProc>(std::make_unique<LocalProc>(pid, watch));
}

void killAllLocalProcs() {
  std::set<pid_t> pids;
  {
    std::lock_guard<std::mutex> guard(liveMu);
    pids = livePids();
  }
  for (pid_t pid : pids)
    ::kill(pid, SIGKILL);
  for (pid_t pid : pids)
    ::waitpid(pid, nullptr, 0);
}

std::string currentExecutable() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0)
    return "";
  self[n] = '\0';
  return self;
}

std::string locateWorkerBinary() {
  if (const char *env = std::getenv("MONARCH_WORKER_PATH"))
    if (*env)
      return env;
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/'));
    std::string sibling = dir + "/monarch-worker";
    if (::access(sibling.c_str(), X_OK) == 0)
      return sibling;
  }
#ifdef MONARCH_DEFAULT_WORKER_PATH
  return MONARCH_DEFAULT_WORKER_PATH;
#else
  return "monarch-worker";
#endif
}

} // namespace monarch
