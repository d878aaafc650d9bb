//===- CastTest.cpp - Casting through the tree; FIFO order ----------------===//
#include "TestSupport.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <thread>

namespace monarch::test {
namespace {

using namespace std::chrono_literals;

struct CastCase {
  int64_t procs;
  int64_t perProc;
  uint32_t fanout;
  uint64_t expectedReplies; ///< merged replies the controller receives
};

class Casting : public testing::TestWithParam<CastCase> {
protected:
  void TearDown() override { Runtime::global().setFanout(16); }
};

TEST_P(Casting, EveryActorAnswersThroughMergedReplies) {
  CastCase c = GetParam();
  Runtime::global().setFanout(c.fanout);
  auto procs = thisHost().spawnProcs({{"hosts", c.procs}}, testProcOptions());
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  auto actors = procs->spawnPerProc("echo", "Echo", {{"local", c.perProc}});
  ASSERT_TRUE(actors.ok()) << actors.status().toString();
  ASSERT_EQ(actors->size(), static_cast<size_t>(c.procs * c.perProc));

  uint64_t before = PendingCall::replyMessagesReceived();
  auto ranks = actors->call<int64_t>("rank").get(30s);
  uint64_t replies = PendingCall::replyMessagesReceived() - before;
  ASSERT_TRUE(ranks.ok()) << ranks.status().toString();
  for (size_t i = 0; i < ranks->size(); ++i)
    ASSERT_EQ((*ranks)[i], static_cast<int64_t>(i));
  EXPECT_EQ(ranks->at({c.procs - 1, c.perProc - 1}), c.procs * c.perProc - 1);
  EXPECT_EQ(replies, c.expectedReplies);

  // Broadcasts reach everyone too, and stay ordered before the next call.
  ASSERT_TRUE(actors->broadcast("echo", std::string("x")).isOk());
  auto again = actors->call<std::string>("echo", std::string("y")).get(30s);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), ranks->size());
  EXPECT_TRUE(procs->stop().isOk());
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, Casting,
    testing::Values(CastCase{1, 1, 16, 1},    // 1 actor
                    CastCase{4, 4, 16, 4},    // 16 actors, one hop per proc
                    CastCase{17, 1, 16, 16},  // 17 procs: two levels
                    CastCase{8, 32, 2, 2},    // 256 actors, depth-3 tree
                    CastCase{4, 256, 16, 4}), // 1024 actors on 4 procs
    [](const testing::TestParamInfo<CastCase> &info) {
      return std::to_string(info.param.procs * info.param.perProc) +
             "actors_fanout" + std::to_string(info.param.fanout);
    });

TEST(Ordering, MillionMessagesFromSeveralSendersArriveInOrder) {
  auto procs = thisHost().spawnProcs({{"gpu", 1}}, testProcOptions("order"));
  ASSERT_TRUE(procs.ok());
  auto sink = procs->spawn("sink", "Sink");
  ASSERT_TRUE(sink.ok());
  constexpr int senders = 4;
  // MONARCH_ORDERING_MESSAGES raises the total for campaigns
  // (bench/reliability/campaign.py sends ten million).
  int64_t total = 1000000;
  if (const char *env = std::getenv("MONARCH_ORDERING_MESSAGES"); env && *env)
    total = std::max<int64_t>(senders, std::atoll(env));
  const int64_t perSender = total / senders;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int s = 0; s < senders; ++s)
    threads.emplace_back([&, s] {
      for (int64_t i = 1; i <= perSender; ++i)
        if (!sink->broadcast("record", int64_t{s}, i).isOk())
          ++failures;
    });
  for (auto &t : threads)
    t.join();
  ASSERT_EQ(failures.load(), 0);
  auto summary =
      sink->callOne<std::map<std::string, int64_t>>("summary").get(600s);
  ASSERT_TRUE(summary.ok()) << summary.status().toString();
  EXPECT_EQ(summary->at("count"), senders * perSender);
  std::printf("%lld messages from %d senders, %lld out of order\n",
              static_cast<long long>(summary->at("count")), senders,
              static_cast<long long>(summary->at("violations")));
  EXPECT_EQ(summary->at("violations"), 0);
  EXPECT_EQ(summary->at("senders"), senders);
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Ordering, CastsAndDirectSendsFromOneSenderStayInOrder) {
  // With fan-out 1 a cast to both procs reaches proc 1 through proc 0, while
  // a send to the slice {1} goes straight there: the receiver must reorder.
  Runtime::global().setFanout(1);
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("mixed"));
  ASSERT_TRUE(procs.ok());
  auto sink = procs->spawn("sink", "Sink");
  ASSERT_TRUE(sink.ok());
  auto second = sink->slice("gpu", 1);
  ASSERT_TRUE(second.ok());
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s)
    threads.emplace_back([&, s] {
      for (int64_t i = 1; i <= 20000; ++i) {
        const ActorMesh &target = (i % 3 == 0) ? *sink : *second;
        ASSERT_TRUE(target.broadcast("recordIncreasing", int64_t{s}, i).isOk());
      }
    });
  for (auto &t : threads)
    t.join();
  auto summaries =
      sink->call<std::map<std::string, int64_t>>("summary").get(60s);
  Runtime::global().setFanout(16);
  ASSERT_TRUE(summaries.ok()) << summaries.status().toString();
  EXPECT_EQ((*summaries)[0].at("violations"), 0);
  EXPECT_EQ((*summaries)[1].at("violations"), 0);
  EXPECT_EQ((*summaries)[1].at("count"), 40000);
  EXPECT_EQ((*summaries)[0].at("count"), 2 * (20000 / 3));
  EXPECT_TRUE(procs->stop().isOk());
}

} // namespace
} // namespace monarch::test
