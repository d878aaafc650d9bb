//===- ReliabilityTest.cpp - Bounded resources and malformed input --------===//
//
// What issue 23 found and what must hold now: system actors survive
// malformed broadcasts, replies and requests too large to send fail their
// call with a reason instead of vanishing, spawns past the host's limit are
// refused before anything forks, and workers inherit none of the
// controller's descriptors.
//
//===----------------------------------------------------------------------===//
#include "StopProcess.h"
#include "TestSupport.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/OwnedDirs.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

namespace monarch::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// Sets an environment variable for one test.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::string &value) : name(name) {
    if (const char *old = std::getenv(name))
      saved = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (saved)
      ::setenv(name, saved->c_str(), 1);
    else
      ::unsetenv(name);
  }

private:
  const char *name;
  std::optional<std::string> saved;
};

TEST(SystemActors, AMalformedBroadcastNeverStopsASystemActor) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("sysa"));
  ASSERT_TRUE(procs.ok());
  auto system = procs->spawn("system", "SystemEcho");
  auto user = procs->spawn("user", "Echo");
  ASSERT_TRUE(system.ok() && user.ok());
  EventLog events;
  system->supervise(events.hook());
  user->supervise(events.hook());
  // An empty endpoint name, an unknown one, arguments of the wrong type and
  // a handler that throws: each used to stop the tensor worker's actor.
  ASSERT_TRUE(system->broadcast("").isOk());
  ASSERT_TRUE(system->broadcast("noSuchEndpoint", int64_t{1}).isOk());
  ASSERT_TRUE(system->broadcast("echo", int64_t{42}).isOk());
  ASSERT_TRUE(system->broadcast("failBroadcast", std::string("boom")).isOk());
  // Still serving, in order after those.
  auto ranks = system->call<int64_t>("rank").get(10s);
  ASSERT_TRUE(ranks.ok()) << ranks.status().toString();
  EXPECT_EQ((*ranks)[1], 1);
  // A user actor keeps Monarch's semantics: the failed broadcast stops it.
  ASSERT_TRUE(user->broadcast("").isOk());
  ASSERT_TRUE(events.waitFor(2));
  for (const auto &event : events.snapshot())
    EXPECT_EQ(event.mesh, "user") << event.toString();
  auto stopped = user->call<int64_t>("rank").get(10s);
  EXPECT_FALSE(stopped.ok());
  // The system actors answered after every malformed broadcast had been
  // handled (one sender, in order), so none of them stopped.
  EXPECT_EQ(events.snapshot().size(), 2u);
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Replies, ARequestOrReplyTooLargeToSendFailsTheCallWithItsReason) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("bigr"));
  ASSERT_TRUE(procs.ok());
  auto echo = procs->spawn("echo", "Echo");
  ASSERT_TRUE(echo.ok());
  const int64_t big = 20 << 20; // past the 16 MiB control frame
  // A reply of 20 MiB in a string: an error naming the limit and the way
  // out, at once -- not dropped by the link, leaving the caller to time out.
  auto start = Clock::now();
  auto reply = echo->slice("gpu", 1)->callOne<std::string>("bigString", big)
                   .get(30s);
  ASSERT_FALSE(reply.ok());
  EXPECT_LT(Clock::now() - start, 20s);
  EXPECT_TRUE(contains(reply.status().message(), "too large")) << reply.status().toString();
  EXPECT_TRUE(contains(reply.status().message(), "Blob")) << reply.status().toString();
  // Two values of 10 MiB each fit alone but not merged into one reply (a
  // fan-out of 1 makes rank 0 merge rank 1's): that fails as well, at once.
  Runtime::global().setFanout(1);
  start = Clock::now();
  auto merged = echo->call<std::string>("bigString", int64_t{10 << 20}).get(30s);
  Runtime::global().setFanout(16);
  ASSERT_FALSE(merged.ok());
  EXPECT_LT(Clock::now() - start, 20s);
  EXPECT_TRUE(contains(merged.status().message(), "too large"))
      << merged.status().toString();
  // The same bytes as a Blob travel as a payload frame.
  auto blob = echo->slice("gpu", 0)->callOne<Blob>("bigBlob", big).get(30s);
  ASSERT_TRUE(blob.ok()) << blob.status().toString();
  EXPECT_EQ(blob->buffer.size(), size_t(big));
  // A request too large: refused before it is sent...
  auto request = echo->call<std::string>("echo", std::string(big, 'y')).get(5s);
  ASSERT_FALSE(request.ok());
  EXPECT_TRUE(contains(request.status().message(), "exceeds the limit"))
      << request.status().toString();
  // ...and the sequence numbers it had taken are skipped: later calls and
  // broadcasts to the same procs are delivered, in order.
  ASSERT_TRUE(
      echo->broadcast("echo", std::string(big, 'z')).code() == ErrorCode::Invalid);
  auto after = echo->call<std::string>("echo", std::string("small")).get(10s);
  ASSERT_TRUE(after.ok()) << after.status().toString();
  EXPECT_EQ((*after)[1], "small");
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Limits, SpawnsPastTheHostLimitAreRefusedBeforeAnythingForks) {
  ScopedEnv limit("MONARCH_MAX_PROCS_PER_HOST", "3");
  EXPECT_EQ(liveLocalProcs(), 0);
  auto start = Clock::now();
  auto tooMany = thisHost().spawnProcs({{"gpu", 4}}, testProcOptions("lim"));
  ASSERT_FALSE(tooMany.ok());
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(tooMany.status().code(), ErrorCode::Exhausted);
  EXPECT_TRUE(contains(tooMany.status().message(), "limit of 3 procs"))
      << tooMany.status().message();
  EXPECT_TRUE(contains(tooMany.status().message(), "MONARCH_MAX_PROCS_PER_HOST"));
  EXPECT_EQ(liveLocalProcs(), 0) << "nothing was forked";
  // The limit counts every running proc of this process, across meshes.
  auto three = thisHost().spawnProcs({{"gpu", 3}}, testProcOptions("lim3"));
  ASSERT_TRUE(three.ok()) << three.status().toString();
  auto fourth = thisHost().spawnProcs({{"gpu", 1}}, testProcOptions("lim1"));
  ASSERT_FALSE(fourth.ok());
  EXPECT_TRUE(contains(fourth.status().message(), "3 running"))
      << fourth.status().message();
  EXPECT_TRUE(three->stop().isOk());
  auto again = thisHost().spawnProcs({{"gpu", 1}}, testProcOptions("lim1b"));
  EXPECT_TRUE(again.ok()) << again.status().toString();
  if (again.ok())
    EXPECT_TRUE(again->stop().isOk());
}

TEST(Limits, TheDefaultLimitComesFromTheHostAndIsFinite) {
  ::unsetenv("MONARCH_MAX_PROCS_PER_HOST");
  ProcLimit limit = localProcLimit();
  EXPECT_GE(limit.max, 1);
  EXPECT_LE(limit.max, 1 << 20);
  EXPECT_TRUE(contains(limit.basis, "cores")) << limit.basis;
  // spawn_procs({"gpu": 100000}) is refused at once with that explanation.
  auto start = Clock::now();
  auto huge = thisHost().spawnProcs({{"gpu", 100000}}, testProcOptions("huge"));
  ASSERT_FALSE(huge.ok());
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_TRUE(contains(huge.status().message(), limit.basis))
      << huge.status().message();
  // And a mesh no host could hold is refused as a mesh.
  auto absurd = thisHost().spawnProcs({{"a", int64_t{1} << 40}},
                                      testProcOptions("absurd"));
  ASSERT_FALSE(absurd.ok());
  EXPECT_TRUE(contains(absurd.status().message(), "at most 1048576 ranks"))
      << absurd.status().message();
}

/// The socket inodes of a process's open descriptors.
std::set<std::string> socketInodes(const std::string &pid) {
  std::set<std::string> out;
  std::string dir = "/proc/" + pid + "/fd";
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      char target[256];
      ssize_t n = ::readlink((dir + "/" + e->d_name).c_str(), target,
                             sizeof(target) - 1);
      if (n > 0) {
        target[n] = '\0';
        if (std::string(target).rfind("socket:", 0) == 0)
          out.insert(target);
      }
    }
    ::closedir(d);
  }
  return out;
}

TEST(Descriptors, WorkersHoldNoneOfTheControllersSockets) {
  // Several meshes, so that later workers are forked while the controller
  // holds links to, and connections from, the earlier ones.
  auto first = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("fd1"));
  ASSERT_TRUE(first.ok());
  auto echo = first->spawn("echo", "Echo");
  ASSERT_TRUE(echo.ok());
  ASSERT_TRUE(echo->call<int64_t>("rank").get(10s).ok());
  auto second = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("fd2"));
  ASSERT_TRUE(second.ok());
  std::set<std::string> mine = socketInodes("self");
  ASSERT_FALSE(mine.empty());
  for (auto *procs : {&*first, &*second})
    for (int pid : procs->pids()) {
      std::set<std::string> theirs = socketInodes(std::to_string(pid));
      for (const auto &inode : theirs)
        EXPECT_EQ(mine.count(inode), 0u)
            << "worker " << pid << " holds the controller's " << inode;
    }
  // And every socket of this process is close-on-exec, for whatever else
  // it may start (a subprocess of the user's program).
  DIR *d = ::opendir("/proc/self/fd");
  ASSERT_NE(d, nullptr);
  while (dirent *e = ::readdir(d)) {
    int fd = std::atoi(e->d_name);
    char target[256];
    ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof(target) - 1);
    if (n <= 0 || fd == ::dirfd(d))
      continue;
    target[n] = '\0';
    if (std::string(target).rfind("socket:", 0) == 0)
      EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << "fd " << fd;
  }
  ::closedir(d);
  EXPECT_TRUE(first->stop().isOk());
  EXPECT_TRUE(second->stop().isOk());
}


//===----------------------------------------------------------------------===//
// Hang detection (proc/Liveness.h).
//===----------------------------------------------------------------------===//

int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t)
      .count();
}

SpawnProcsOptions fastLiveness(const std::string &name) {
  SpawnProcsOptions options = testProcOptions(name);
  options.liveness.interval = 100ms;
  options.liveness.deadline = 1000ms;
  return options;
}

TEST(Liveness, AStoppedProcIsReportedAndCallsToItFailUntilItComesBack) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, fastLiveness("hang"));
  ASSERT_TRUE(procs.ok());
  EventLog events;
  procs->supervise(events.hook());
  auto echo = procs->spawn("echo", "Echo");
  ASSERT_TRUE(echo.ok());
  ASSERT_TRUE(echo->call<int64_t>("rank").get(10s).ok());
  int pid = procs->pids()[1];
  auto stoppedAt = Clock::now();
  ASSERT_TRUE(stopProcess(pid));
  // A call in flight to the stuck proc: only its callers' timeout used to
  // end it, and nothing said which proc was stuck.
  auto inFlight = echo->slice("gpu", 1)->callOne<int64_t>("rank");
  ASSERT_TRUE(events.waitFor(1, 5s)) << "never reported";
  int64_t detectedMs = msSince(stoppedAt);
  auto event = events.snapshot().front();
  EXPECT_EQ(event.kind, SupervisionKind::Unresponsive);
  EXPECT_EQ(event.mesh, "hang");
  EXPECT_EQ(event.rank, 1);
  EXPECT_GE(event.silentMs, 1000);
  EXPECT_TRUE(contains(event.toString(), "unresponsive: no heartbeat for"))
      << event.toString();
  EXPECT_GE(detectedMs, 800);  // the deadline, less one heartbeat interval
  EXPECT_LT(detectedMs, 2500); // the deadline plus a check and some slack
  auto failed = inFlight.get(2s);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), ErrorCode::Supervision);
  EXPECT_TRUE(contains(failed.status().message(), "rank 1 is unresponsive"))
      << failed.status().message();
  // New calls to it fail at once; the rest of the mesh answers.
  auto start = Clock::now();
  EXPECT_FALSE(echo->call<int64_t>("rank").get(2s).ok());
  EXPECT_LT(msSince(start), 500);
  auto other = echo->slice("gpu", 0)->callOne<int64_t>("rank").get(5s);
  ASSERT_TRUE(other.ok()) << other.status().toString();
  // It comes back: reported again, and calls to it work again.
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  ASSERT_TRUE(events.waitFor(2, 5s));
  auto back = events.snapshot()[1];
  EXPECT_EQ(back.kind, SupervisionKind::Responsive);
  EXPECT_EQ(back.rank, 1);
  EXPECT_GE(back.silentMs, 1000);
  auto again = echo->call<int64_t>("rank").get(5s);
  ASSERT_TRUE(again.ok()) << again.status().toString();
  EXPECT_EQ((*again)[1], 1);
  EXPECT_EQ(events.snapshot().size(), 2u);
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Liveness, TheDefaultsReportAHangWithinFiveSeconds) {
  ::unsetenv("MONARCH_HEARTBEAT_MS");
  ::unsetenv("MONARCH_UNRESPONSIVE_MS");
  auto procs =
      thisHost().spawnProcs({{"gpu", 1}}, testProcOptions("hangdefault"));
  ASSERT_TRUE(procs.ok());
  EventLog events;
  procs->supervise(events.hook());
  int pid = procs->pids()[0];
  auto stoppedAt = Clock::now();
  ASSERT_TRUE(stopProcess(pid));
  ASSERT_TRUE(events.waitFor(1, 10s));
  int64_t detectedMs = msSince(stoppedAt);
  EXPECT_EQ(events.snapshot().front().kind, SupervisionKind::Unresponsive);
  EXPECT_LE(detectedMs, 5000);
  EXPECT_GE(detectedMs, 3400);
  std::printf("default hang detection: %lld ms after SIGSTOP\n",
              static_cast<long long>(detectedMs));
  // A stopped proc is still stopped (and killed) by stop().
  auto start = Clock::now();
  EXPECT_TRUE(procs->stop().isOk());
  EXPECT_LT(msSince(start), 12000);
}

TEST(Liveness, BusyButRunningProcsAreNeverReported) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, fastLiveness("busy"));
  ASSERT_TRUE(procs.ok());
  EventLog events;
  procs->supervise(events.hook());
  auto echo = procs->spawn("echo", "Echo");
  ASSERT_TRUE(echo.ok());
  // Handlers that hold their actor for 3 s, longer than the deadline: the
  // heartbeats come from the io thread, which a busy actor does not hold.
  auto slow = echo->call<int64_t>("sleepMs", int64_t{3000}).get(20s);
  ASSERT_TRUE(slow.ok()) << slow.status().toString();
  EXPECT_EQ(events.snapshot().size(), 0u);
  EXPECT_TRUE(procs->stop().isOk());
  EXPECT_EQ(events.snapshot().size(), 0u);
}


//===----------------------------------------------------------------------===//
// Cleanup on every exit path (util/OwnedDirs.h).
//===----------------------------------------------------------------------===//

/// This test binary run as a controller (TestMain.cpp's helper mode), with
/// its stdout on a pipe: it reports its private directory and its procs.
class ControllerProcess {
public:
  ControllerProcess() {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
      return;
    std::string exe = currentExecutable();
    std::vector<char *> argv = {exe.data(), nullptr};
    std::vector<std::string> envStrings = {"MONARCH_TEST_CONTROLLER=1"};
    for (char **e = environ; *e; ++e)
      envStrings.emplace_back(*e);
    std::vector<char *> envp;
    for (auto &e : envStrings)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::execve(exe.c_str(), argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out[1]);
    reader = ::fdopen(out[0], "r");
    char line[512];
    while (reader && std::fgets(line, sizeof(line), reader)) {
      std::string l(line);
      if (!l.empty() && l.back() == '\n')
        l.pop_back();
      if (l.rfind("dir ", 0) == 0)
        dir = l.substr(4);
      else if (l.rfind("pid ", 0) == 0)
        workers.push_back(std::stoi(l.substr(4)));
      else if (l == "ready")
        break;
    }
  }
  ~ControllerProcess() {
    if (pid > 0 && !reaped) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (reader)
      std::fclose(reader);
  }
  /// Sends `sig` and waits (bounded) for the process to end; its status.
  int killAndWait(int sig) {
    ::kill(pid, sig);
    auto until = Clock::now() + 10s;
    int status = 0;
    while (Clock::now() < until) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        return status;
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

  pid_t pid = -1;
  std::string dir;
  std::vector<int> workers;

private:
  FILE *reader = nullptr;
  bool reaped = false;
};

bool exists(const std::string &path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

/// Waits (bounded) until none of `pids` runs.
bool allGone(const std::vector<int> &pids, std::chrono::milliseconds bound) {
  auto until = Clock::now() + bound;
  for (;;) {
    bool any = false;
    for (int p : pids)
      any |= ::kill(p, 0) == 0;
    if (!any)
      return true;
    if (Clock::now() > until)
      return false;
    std::this_thread::sleep_for(10ms);
  }
}

class SignalCleanup : public ::testing::TestWithParam<int> {};

TEST_P(SignalCleanup, AControllerEndedByASignalLeavesNoDirectoryOrProc) {
  int sig = GetParam();
  ControllerProcess controller;
  ASSERT_FALSE(controller.dir.empty()) << "the helper did not start";
  ASSERT_EQ(controller.workers.size(), 2u);
  ASSERT_TRUE(exists(controller.dir));
  int status = controller.killAndWait(sig);
  ASSERT_NE(status, -1) << "the controller did not end";
  // It still dies of the signal (the handler re-raises it)...
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
  // ...its directory is gone, and its procs follow it (PR_SET_PDEATHSIG).
  EXPECT_FALSE(exists(controller.dir)) << controller.dir;
  EXPECT_TRUE(allGone(controller.workers, 5s));
}

INSTANTIATE_TEST_SUITE_P(TermIntHup, SignalCleanup,
                         ::testing::Values(SIGTERM, SIGINT, SIGHUP));

/// A TMPDIR of the test's own: other monarch processes running at the same
/// time (ctest -j) reap $TMPDIR and /tmp, and would take a killed helper's
/// directory before this test looks at it.
class PrivateTmpdir {
public:
  PrivateTmpdir() {
    char pattern[] = "/tmp/mclean.XXXXXX";
    if (::mkdtemp(pattern))
      dir = pattern;
    if (const char *old = std::getenv("TMPDIR"))
      saved = old;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~PrivateTmpdir() {
    if (saved)
      ::setenv("TMPDIR", saved->c_str(), 1);
    else
      ::unsetenv("TMPDIR");
    removeTreeSafely(dir.c_str());
  }
  std::string dir;

private:
  std::optional<std::string> saved;
};

TEST(Cleanup, AKilledControllersDirectoryIsRemovedByTheNextOne) {
  PrivateTmpdir tmp;
  ControllerProcess controller;
  ASSERT_EQ(controller.dir.rfind(tmp.dir, 0), 0u) << controller.dir;
  ASSERT_FALSE(controller.dir.empty()) << "the helper did not start";
  int status = controller.killAndWait(SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(allGone(controller.workers, 5s));
  // Nothing ran in it: the directory is left...
  ASSERT_TRUE(exists(controller.dir));
  // ...until a monarch process makes its own (what the runtime's start
  // does once per process) or reaps explicitly.
  EXPECT_GE(reapStaleOwnedDirs(), 1);
  EXPECT_FALSE(exists(controller.dir)) << controller.dir;
  // A running owner's directory is never taken: this process's own.
  std::string mine = makeOwnedDir("mine");
  ASSERT_FALSE(mine.empty());
  reapStaleOwnedDirs();
  EXPECT_TRUE(exists(mine));
  removeOwnedDir(mine);
  EXPECT_FALSE(exists(mine));
}

TEST(Cleanup, OnlyDirectoriesOfGoneOwnersInThisPidNamespaceAreReaped) {
  std::string ns = std::to_string(pidNamespaceId());
  // A live process's (this test's parent shell would do; use pid 1), another
  // namespace's, and a stranger's name are all left alone.
  std::vector<std::string> kept = {
      "/tmp/monarch-x-p" + ns + ".1-abcdef",
      "/tmp/monarch-x-p" + std::to_string(pidNamespaceId() + 1) +
          ".999999-abcdef",
      "/tmp/monarch-unrelated-abcdef"};
  // A pid that is not running (past pid_max's default range).
  std::string gone = "/tmp/monarch-x-p" + ns + ".4194000-abcdef";
  for (const auto &d : kept)
    ASSERT_EQ(::mkdir(d.c_str(), 0700), 0) << d;
  ASSERT_EQ(::mkdir(gone.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((gone + "/nested").c_str(), 0700), 0);
  std::FILE *f = std::fopen((gone + "/nested/file").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  reapStaleOwnedDirs();
  EXPECT_FALSE(exists(gone));
  for (const auto &d : kept) {
    EXPECT_TRUE(exists(d)) << d;
    ::rmdir(d.c_str());
  }
}

} // namespace
} // namespace monarch::test
