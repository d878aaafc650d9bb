//===- ReliabilityTest.cpp - Bounded resources and malformed input --------===//
//
// What issue 23 found and what must hold now: system actors survive
// malformed broadcasts, replies and requests too large to send fail their
// call with a reason instead of vanishing, spawns past the host's limit are
// refused before anything forks, and workers inherit none of the
// controller's descriptors.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "monarch/runtime/proc/Runtime.h"

#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

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

} // namespace
} // namespace monarch::test
