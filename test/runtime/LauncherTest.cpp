//===- LauncherTest.cpp - The local launcher: command, output, exit -------===//
//
// What host agents rely on when they start Python workers and forward their
// output: a launch carries arguments and environment, output lines go to a
// sink when one is given, and a proc's exit is reported after its output --
// but not held back for long by a grandchild that keeps the pipes open.
//
//===----------------------------------------------------------------------===//

#include "monarch/runtime/proc/ProcLauncher.h"

#include <asio.hpp>
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <sys/socket.h>
#include <unistd.h>
#include <csignal>
#include <mutex>
#include <thread>

using namespace monarch;
using namespace std::chrono_literals;

namespace {

/// An io thread for the launcher, and what its procs printed and how they
/// ended.
class LauncherHarness {
public:
  LauncherHarness()
      : work(asio::make_work_guard(io)), thread([this] { io.run(); }) {}
  ~LauncherHarness() {
    work.reset();
    io.stop();
    thread.join();
  }

  ProcLaunchSpec shell(const std::string &script) {
    ProcLaunchSpec spec;
    spec.workerPath = "/bin/sh";
    spec.args = {"-c", script};
    spec.logSink = [this](bool isStderr, std::vector<std::string> &&lines) {
      std::lock_guard<std::mutex> guard(mu);
      for (auto &l : lines)
        (isStderr ? err : out).push_back(std::move(l));
      cv.notify_all();
    };
    return spec;
  }

  /// Starts `spec`; the exit handler records how it ended and the stdout
  /// lines seen by then.
  std::unique_ptr<LaunchedProc> start(const ProcLaunchSpec &spec) {
    LocalProcLauncher launcher(io);
    auto launched = launcher.launch(spec);
    EXPECT_TRUE(launched.ok()) << launched.status().toString();
    if (!launched.ok())
      return nullptr;
    (*launched)->onExit([this](const std::string &how) {
      std::lock_guard<std::mutex> guard(mu);
      exitHow = how;
      outAtExit = out;
      errAtExit = err;
      cv.notify_all();
    });
    return std::move(launched).value();
  }

  bool waitFor(std::function<bool()> done, std::chrono::milliseconds bound) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, bound, done);
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> out, err, outAtExit, errAtExit;
  std::string exitHow;
};

} // namespace

TEST(LocalLauncher, ArgsEnvAndOutputLinesBeforeTheExit) {
  LauncherHarness h;
  ProcLaunchSpec spec = h.shell("echo \"first $MONARCH_TEST_FOO\"; "
                                "echo to-stderr >&2; printf 'no newline'; "
                                "exit 3");
  spec.env = {{"MONARCH_TEST_FOO", "bar"}, {"PATH", "/usr/bin:/bin"}};
  auto proc = h.start(spec);
  ASSERT_TRUE(proc);
  ASSERT_TRUE(h.waitFor([&] { return !h.exitHow.empty(); }, 10s));
  EXPECT_EQ(h.exitHow, "exited with code 3");
  // Every line, the unterminated last one included, came before the exit.
  EXPECT_EQ(h.outAtExit, (std::vector<std::string>{"first bar", "no newline"}));
  EXPECT_EQ(h.errAtExit, std::vector<std::string>{"to-stderr"});
}

TEST(LocalLauncher, AGrandchildHoldingTheOutputDelaysTheExitOnlyBriefly) {
  LauncherHarness h;
  // The background sleep inherits stdout/stderr: they stay open after the
  // shell exits. Its pid comes first so that the test can end it.
  auto proc = h.start(h.shell("sleep 30 & echo $!; exit 0"));
  ASSERT_TRUE(proc);
  ASSERT_TRUE(h.waitFor([&] { return !h.out.empty(); }, 10s));
  int grandchild = std::stoi(h.out.front());
  auto start = std::chrono::steady_clock::now();
  bool exited = h.waitFor([&] { return !h.exitHow.empty(); }, 10s);
  auto took = std::chrono::steady_clock::now() - start;
  ::kill(grandchild, SIGKILL);
  ASSERT_TRUE(exited) << "the exit waited for the grandchild";
  EXPECT_EQ(h.exitHow, "exited with code 0");
  // Held back for the drain bound (1 s, counted from the shell's end, which
  // came after its first line), then reported.
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 5s);
}

TEST(LocalLauncher, ChildrenInheritOnlyStdioAndTheBootstrap) {
  LauncherHarness h;
  // Descriptors this process holds without close-on-exec, as a library
  // (Gloo, a plugin) might: a pipe and a socket, moved to known numbers.
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  ASSERT_EQ(::dup2(pipeFds[0], 100), 100);
  ASSERT_EQ(::dup2(pipeFds[1], 101), 101);
  ASSERT_EQ(::dup2(sock, 102), 102);
  for (int fd : {pipeFds[0], pipeFds[1], sock})
    ::close(fd);
  auto proc = h.start(
      h.shell("for fd in 3 100 101 102; do [ -e /proc/$$/fd/$fd ] && "
              "echo has $fd; done; echo checked"));
  ASSERT_TRUE(proc);
  ASSERT_TRUE(h.waitFor([&] { return !h.exitHow.empty(); }, 10s));
  for (int fd : {100, 101, 102})
    ::close(fd);
  // fd 3 is the bootstrap pipe; nothing else crossed the exec.
  EXPECT_EQ(h.outAtExit, (std::vector<std::string>{"has 3", "checked"}));
}

// A proc outlives the thread that launched it: a child's PR_SET_PDEATHSIG
// fires when the thread that forked it ends, so procs launched from
// short-lived threads (a Python actor's endpoint, a pytest worker) were
// SIGKILLed when those returned. The launcher forks on a thread of its own.
TEST(LocalLauncher, AProcOutlivesTheThreadThatLaunchedIt) {
  LauncherHarness h;
  char dir[] = "/tmp/monarch-launcher-XXXXXX";
  ASSERT_TRUE(::mkdtemp(dir));
  std::string go = std::string(dir) + "/go";
  std::unique_ptr<LaunchedProc> proc;
  std::thread launcher([&] {
    proc = h.start(h.shell("echo up; while [ ! -e " + go +
                           " ]; do sleep 0.02; done; echo done"));
  });
  launcher.join(); // the launching thread has ended
  ASSERT_TRUE(proc);
  ASSERT_TRUE(h.waitFor([&] { return !h.out.empty(); }, 10s));
  { std::ofstream(go) << "1"; }
  bool exited = h.waitFor([&] { return !h.exitHow.empty(); }, 10s);
  ::unlink(go.c_str());
  ::rmdir(dir);
  ASSERT_TRUE(exited);
  EXPECT_EQ(h.exitHow, "exited with code 0");
  EXPECT_EQ(h.outAtExit, (std::vector<std::string>{"up", "done"}));
}
