//===- SupervisionTest.cpp - Failed actors and dead procs -----------------===//
#include "TestSupport.h"

#include <csignal>
#include <thread>
#include <unistd.h>

namespace monarch::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t)
      .count();
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(Supervision, BroadcastFailureStopsActorAndNotifiesOwner) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("supa"));
  ASSERT_TRUE(procs.ok());
  auto echo = procs->spawn("workers", "Echo");
  ASSERT_TRUE(echo.ok());
  EventLog events;
  echo->supervise(events.hook());
  ASSERT_TRUE(echo->slice("gpu", 1)
                  ->broadcast("failBroadcast", std::string("boom"))
                  .isOk());
  ASSERT_TRUE(events.waitFor(1));
  auto ev = events.snapshot().front();
  EXPECT_EQ(ev.mesh, "workers");
  EXPECT_EQ(ev.rank, 1);
  EXPECT_TRUE(contains(ev.reason, "boom")) << ev.reason;

  // Calls that include the stopped actor fail at once; the rest work.
  auto start = Clock::now();
  auto all = echo->call<int64_t>("rank").get(5s);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), ErrorCode::Supervision);
  EXPECT_TRUE(contains(all.status().message(), "rank 1"));
  EXPECT_LT(msSince(start), 500);
  auto survivor = echo->slice("gpu", 0)->callOne<int64_t>("rank").get(5s);
  ASSERT_TRUE(survivor.ok());
  EXPECT_EQ(*survivor, 0);
  EXPECT_EQ(events.snapshot().size(), 1u);
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Supervision, UnhandledEventsPropagateToTheOwner) {
  auto procs = thisHost().spawnProcs({{"gpu", 1}}, testProcOptions("supb"));
  ASSERT_TRUE(procs.ok());
  auto echo = procs->spawn("declines", "Echo");
  ASSERT_TRUE(echo.ok());
  EventLog actorLevel, procLevel;
  echo->supervise([&](const SupervisionEvent &e) {
    actorLevel.record(e);
    return false; // not handled: goes up to the proc mesh
  });
  procs->supervise(procLevel.hook());
  ASSERT_TRUE(echo->broadcast("failBroadcast", std::string("up")).isOk());
  ASSERT_TRUE(procLevel.waitFor(1));
  EXPECT_EQ(actorLevel.snapshot().size(), 1u);
  EXPECT_EQ(procLevel.snapshot().front().mesh, "declines");

  // Unhandled at every level it reaches the root (the test's recorder).
  auto other = procs->spawn("unhandled", "Echo");
  ASSERT_TRUE(other.ok());
  procs->supervise(nullptr);
  size_t before = rootEvents().snapshot().size();
  ASSERT_TRUE(other->broadcast("failBroadcast", std::string("root")).isOk());
  ASSERT_TRUE(rootEvents().waitFor(before + 1));
  EXPECT_EQ(rootEvents().snapshot().back().mesh, "unhandled");
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(SupervisionDeathTest, UnhandledAtRootFailsTheController) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setRootSupervisionHandler(nullptr);
        auto procs = thisHost().spawnProcs({{"gpu", 1}}, testProcOptions("d"));
        if (!procs.ok())
          std::_Exit(7);
        auto echo = procs->spawn("doomed", "Echo");
        if (!echo.ok())
          std::_Exit(8);
        (void)echo->broadcast("failBroadcast", std::string("fatal reason"));
        // The root handler ends the process; this wait is only a bound.
        (void)echo->call<int64_t>("sleepMs", int64_t{1}).get(20s);
        std::this_thread::sleep_for(20s);
        std::_Exit(9);
      },
      testing::ExitedWithCode(1),
      "unhandled supervision: mesh 'doomed' rank 0 failed: .*fatal reason");
}

enum class Death { Exit, Segfault, Killed };

class ProcDeath : public testing::TestWithParam<Death> {};

TEST_P(ProcDeath, IsDetectedAndContained) {
  auto bystanderProcs =
      thisHost().spawnProcs({{"gpu", 1}}, testProcOptions("bystander"));
  ASSERT_TRUE(bystanderProcs.ok());
  auto bystander = bystanderProcs->spawn("b", "Echo");
  ASSERT_TRUE(bystander.ok());

  auto procs = thisHost().spawnProcs({{"gpu", 3}}, testProcOptions("dying"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  EventLog events;
  procs->supervise(events.hook());
  // Two actors per proc: one busy in a long call, one that crashes the proc.
  auto echo = procs->spawnPerProc("w", "Echo", {{"local", 2}});
  ASSERT_TRUE(echo.ok());
  auto busy = echo->slice("gpu", 1)->slice("local", 0);
  ASSERT_TRUE(busy.ok());
  auto inflight = busy->callOne<int64_t>("sleepMs", int64_t{10000});
  auto inflightMesh =
      echo->slice("local", 0)->call<int64_t>("sleepMs", int64_t{10000});
  auto victim = echo->slice("gpu", 1)->slice("local", 1);
  ASSERT_TRUE(victim.ok());

  std::string expectedReason;
  auto start = Clock::now();
  switch (GetParam()) {
  case Death::Exit:
    ASSERT_TRUE(victim->broadcast("crash", int64_t{0}).isOk());
    expectedReason = "exited with code 3";
    break;
  case Death::Segfault:
    ASSERT_TRUE(victim->broadcast("crash", int64_t{1}).isOk());
    expectedReason = "killed by signal 11";
    break;
  case Death::Killed:
    ASSERT_EQ(::kill(procs->pids()[1], SIGKILL), 0);
    expectedReason = "killed by signal 9";
    break;
  }

  // In-flight calls fail within a second, naming the mesh and the rank.
  auto failed = inflight.get(5s);
  ASSERT_FALSE(failed.ok());
  EXPECT_LT(msSince(start), 1000);
  EXPECT_EQ(failed.status().code(), ErrorCode::Supervision);
  EXPECT_TRUE(contains(failed.status().message(), "dying"))
      << failed.status().message();
  EXPECT_TRUE(contains(failed.status().message(), "rank 1"));
  EXPECT_TRUE(contains(failed.status().message(), expectedReason))
      << failed.status().message();
  auto failedMesh = inflightMesh.get(5s);
  ASSERT_FALSE(failedMesh.ok());
  EXPECT_EQ(failedMesh.status().code(), ErrorCode::Supervision);

  // The owner got the event.
  ASSERT_TRUE(events.waitFor(1));
  auto ev = events.snapshot().front();
  EXPECT_EQ(ev.mesh, "dying");
  EXPECT_EQ(ev.rank, 1);
  EXPECT_TRUE(contains(ev.reason, expectedReason)) << ev.reason;

  // Later calls to a mesh containing the rank fail at once.
  auto later = Clock::now();
  auto whole = echo->call<int64_t>("rank").get(5s);
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().code(), ErrorCode::Supervision);
  EXPECT_LT(msSince(later), 200);

  // Slices without it, and other meshes, keep working.
  for (int64_t gpu : {0, 2}) {
    auto r = echo->slice("gpu", gpu)
                 ->slice("local", 1)
                 ->callOne<int64_t>("rank")
                 .get(5s);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    EXPECT_EQ(*r, gpu * 2 + 1);
  }
  auto other = bystander->call<std::string>("echo", std::string("ok")).get(5s);
  ASSERT_TRUE(other.ok());

  // stop() still works and spawning again works.
  auto stopStart = Clock::now();
  EXPECT_TRUE(procs->stop().isOk());
  EXPECT_LT(msSince(stopStart), 6000);
  auto again = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("again"));
  ASSERT_TRUE(again.ok());
  auto fresh = again->spawn("w", "Echo");
  ASSERT_TRUE(fresh.ok());
  auto ranks = fresh->call<int64_t>("rank").get(5s);
  ASSERT_TRUE(ranks.ok());
  EXPECT_EQ(ranks->values(), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(again->stop().isOk());
  EXPECT_TRUE(bystanderProcs->stop().isOk());
  EXPECT_EQ(events.snapshot().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Ways, ProcDeath,
                         testing::Values(Death::Exit, Death::Segfault,
                                         Death::Killed),
                         [](const testing::TestParamInfo<Death> &info) {
                           switch (info.param) {
                           case Death::Exit:
                             return "Exit";
                           case Death::Segfault:
                             return "Segfault";
                           case Death::Killed:
                             return "Sigkill";
                           }
                           return "Unknown";
                         });

TEST(Supervision, StopEndsEveryProcWithoutEvents) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("stopper"));
  ASSERT_TRUE(procs.ok());
  EventLog events;
  procs->supervise(events.hook());
  auto pids = procs->pids();
  EXPECT_TRUE(procs->stop().isOk());
  for (int pid : pids)
    EXPECT_NE(::kill(pid, 0), 0) << "proc " << pid << " still exists";
  auto echo = procs->spawn("late", "Echo");
  EXPECT_FALSE(echo.ok());
  EXPECT_EQ(events.snapshot().size(), 0u);
}

/// Fan-out 2 over 4 procs: the caller sends to procs 0 and 2, which forward
/// to procs 1 and 3.
class TreeOfFour : public testing::Test {
protected:
  void SetUp() override { Runtime::global().setFanout(2); }
  void TearDown() override { Runtime::global().setFanout(16); }
};

TEST_F(TreeOfFour, DeadMiddleProcCutsOffOnlyItsSubtree) {
  auto procs = thisHost().spawnProcs({{"gpu", 4}}, testProcOptions("mid"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  EventLog events;
  procs->supervise(events.hook());
  auto echo = procs->spawn("w", "Echo");
  ASSERT_TRUE(echo.ok());
  auto replies = echo->stream<int64_t>("sleepMs", int64_t{400});
  ASSERT_EQ(replies.size(), 4u);
  auto start = Clock::now();
  ASSERT_EQ(::kill(procs->pids()[2], SIGKILL), 0);

  // Proc 2 and proc 3 below it are cut off: supervision errors within a
  // second, naming the mesh and the rank.
  for (int rank : {2, 3}) {
    auto r = replies[rank].get(5s);
    ASSERT_FALSE(r.ok()) << "rank " << rank;
    EXPECT_LT(msSince(start), 1000);
    EXPECT_EQ(r.status().code(), ErrorCode::Supervision);
    EXPECT_TRUE(
        contains(r.status().message(), "w[" + std::to_string(rank) + "]"))
        << r.status().message();
    EXPECT_TRUE(contains(r.status().message(), "proc mesh 'mid' rank 2"))
        << r.status().message();
  }
  // The healthy subtree (proc 0 and proc 1 below it) still delivers.
  for (int rank : {0, 1}) {
    auto r = replies[rank].get(5s);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    EXPECT_EQ(*r, 400);
  }
  // Proc 3 itself lives: direct calls to its actor work.
  auto three = echo->slice("gpu", 3)->callOne<int64_t>("rank").get(5s);
  ASSERT_TRUE(three.ok()) << three.status().toString();
  EXPECT_EQ(*three, 3);
  ASSERT_TRUE(events.waitFor(1));
  EXPECT_EQ(events.snapshot().front().rank, 2);
  EXPECT_TRUE(procs->stop().isOk());
}

TEST_F(TreeOfFour, MergeGoesUpWithoutADeadLeaf) {
  auto procs = thisHost().spawnProcs({{"gpu", 4}}, testProcOptions("leaf"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  EventLog events;
  procs->supervise(events.hook());
  auto echo = procs->spawn("w", "Echo");
  ASSERT_TRUE(echo.ok());
  uint64_t before = PendingCall::replyMessagesReceived();
  auto all = echo->call<int64_t>("sleepMs", int64_t{400});
  auto start = Clock::now();
  ASSERT_EQ(::kill(procs->pids()[1], SIGKILL), 0);

  // The call fails at once, naming the mesh and the unreachable rank.
  auto r = all.get(5s);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(msSince(start), 1000);
  EXPECT_EQ(r.status().code(), ErrorCode::Supervision);
  EXPECT_TRUE(contains(r.status().message(), "w[1]")) << r.status().message();
  // Proc 0 gives up its dead child and still sends its merged reply (with
  // rank 0's value); with proc 2's, the caller gets both first-level replies.
  auto deadline = Clock::now() + 5s;
  while (PendingCall::replyMessagesReceived() - before < 2 &&
         Clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(PendingCall::replyMessagesReceived() - before, 2u);
  EXPECT_TRUE(procs->stop().isOk());
}

} // namespace
} // namespace monarch::test
