//===- TensorSupervisionTest.cpp - Tensor meshes after a worker fails -----===//
//
// DESIGN.md §5 for tensor meshes, as for actor meshes: after a tensor worker
// dies, what needs it fails with a supervision error naming it -- fetches
// from it, collectives with it, on every live member and at once -- while
// slices without it and values already on live ranks keep working. A worker
// that stops answering (SIGSTOP) is reported unresponsive and its fetches
// fail until it is back; a stopped controller fails everything at once.
//
//===----------------------------------------------------------------------===//

#include "WorkerTestSupport.h"
#include "../StopProcess.h"

#include <csignal>
#include <cstdlib>

#include <unistd.h>

using namespace monarch::tensor;
using namespace monarch::tensor::testing;
namespace plan = monarch::plan;
using monarch::test::stopProcess;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kRanks = 4;

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// A controller of the host=2 x gpu=2 mesh driven one batch at a time, as
/// the Python session drives it, with every reply kept by (fetch, rank).
class Session {
public:
  explicit Session(std::chrono::milliseconds timeout = 20s)
      : b({{"host", 2}, {"gpu", 2}}) {
    for (int r = 0; r < kRanks; ++r)
      at.push_back(b.mesh(*b.rootView()
                               .slice("host", r / 2)
                               ->slice("gpu", r % 2)));
    host0 = b.mesh(*b.rootView().slice("host", 0));
    ControllerOptions options;
    options.shape = {{"host", 2}, {"gpu", 2}};
    options.timeout = timeout;
    auto started = Controller::start(options);
    if (!started.ok()) {
      ADD_FAILURE() << started.status().message();
      return;
    }
    c = std::move(started).value();
    EXPECT_TRUE(c->declare(b.program()).isOk());
  }

  /// Submits what was added since the last call.
  Status send() {
    std::vector<plan::Instruction> batch(
        b.program().instructions().begin() + sent,
        b.program().instructions().end());
    sent = b.program().instructions_size();
    return c->submit(batch);
  }

  /// Takes events until `done()` or `bound` passes.
  bool waitFor(const std::function<bool()> &done,
               std::chrono::milliseconds bound = 15s) {
    auto until = Clock::now() + bound;
    while (!done()) {
      if (Clock::now() > until)
        return false;
      auto e = c->next(100ms);
      if (!e)
        continue;
      if (e->kind != ControllerEvent::Kind::Worker) {
        supervision.push_back(*e);
      } else if (e->worker.has_fetch()) {
        const auto &f = e->worker.fetch();
        ++replyCount[{f.instruction(), f.rank()}];
        replies[{f.instruction(), f.rank()}] = f;
      } else if (e->worker.has_failure()) {
        failures.push_back(e->worker.failure());
      }
    }
    return true;
  }
  bool gotReply(int64_t fetch, int rank) {
    return waitFor([&] { return replies.count({fetch, rank}) > 0; });
  }
  const plan::FetchReply &reply(int64_t fetch, int rank) {
    return replies[{fetch, rank}];
  }
  bool hasKind(ControllerEvent::Kind kind) {
    for (const auto &e : supervision)
      if (e.kind == kind)
        return true;
    return false;
  }

  PlanBuilder b;
  std::vector<int64_t> at; ///< 0-d mesh of each rank
  int64_t host0 = 0;       ///< the slice host=0
  std::unique_ptr<Controller> c;
  int sent = 0;
  std::map<std::pair<int64_t, int64_t>, plan::FetchReply> replies;
  std::map<std::pair<int64_t, int64_t>, int> replyCount;
  std::vector<plan::Failure> failures;
  std::vector<ControllerEvent> supervision;
};

/// Expects `r` to be a supervision error caused by rank `failed`.
void expectSupervision(const plan::FetchReply &r, int64_t failed) {
  ASSERT_TRUE(r.has_error()) << "a value where a supervision error was due";
  EXPECT_TRUE(r.error().supervision()) << r.error().message();
  EXPECT_EQ(r.error().failed_rank(), failed) << r.error().message();
  EXPECT_TRUE(contains(r.error().message(), "rank " + std::to_string(failed)))
      << r.error().message();
}

TEST(TensorSupervision, LiveSlicesAndValuesKeepWorkingAfterAWorkerDies) {
  Session s;
  ASSERT_TRUE(s.c);
  auto &b = s.b;
  auto m = meta(plan::FLOAT32, {2, 3});
  int64_t x = makeX(b);
  int64_t before = b.fetch(s.at[1], x);
  ASSERT_TRUE(s.send().isOk());
  ASSERT_TRUE(s.gotReply(before, 1));
  std::vector<int> pids = s.c->pids();
  auto killed = Clock::now();
  ASSERT_EQ(::kill(pids[3], SIGKILL), 0);
  ASSERT_TRUE(s.waitFor(
      [&] { return s.hasKind(ControllerEvent::Kind::ProcFailure); }));
  auto detectedMs = std::chrono::duration<double, std::milli>(Clock::now() -
                                                              killed)
                        .count();
  std::printf("tensor worker death reported in %.1f ms\n", detectedMs);
  EXPECT_LT(detectedMs, 1000);
  EXPECT_EQ(s.supervision.front().rank, 3);
  EXPECT_EQ(s.c->failedRanks().count(3), 1u);

  // Everything below is submitted after the death, as a program would go
  // on; the timeout is 20 s, so anything that waits for rank 3 would show.
  auto start = Clock::now();
  int64_t gpuSum = b.reduce(0, x, m, {"gpu"}, plan::SUM); // {0,1} and {2,3}
  int64_t onLive = b.fetch(s.at[0], gpuSum);              // group {0,1}
  int64_t onBroken = b.fetch(s.at[2], gpuSum);            // group {2,3}
  int64_t allSum = b.reduce(0, x, m, {}, plan::SUM);      // needs rank 3
  int64_t allOn0 = b.fetch(s.at[0], allSum);
  int64_t fromDead = b.fetch(s.at[3], x);   // the dead rank's value
  int64_t oldValue = b.fetch(s.at[2], x);   // computed before, on a live rank
  int64_t ones = b.op(s.host0, "aten::ones", "", {val::ints({2})});
  int64_t slice = b.fetch(
      s.at[1], b.reduce(s.host0, ones, meta(plan::FLOAT32, {2}), {"gpu"},
                        plan::SUM)); // a slice without rank 3
  ASSERT_TRUE(s.send().isOk()) << "submit refused after a death";
  ASSERT_TRUE(s.waitFor([&] {
    return s.replies.count({onLive, 0}) && s.replies.count({onBroken, 2}) &&
           s.replies.count({allOn0, 0}) && s.replies.count({fromDead, 3}) &&
           s.replies.count({oldValue, 2}) && s.replies.count({slice, 1});
  })) << "a reply never came";
  EXPECT_LT(Clock::now() - start, 10s);

  // The live slice's collective, the old value and the new slice: values.
  ASSERT_TRUE(s.reply(onLive, 0).has_value()) << s.reply(onLive, 0).error().message();
  EXPECT_TRUE(at::equal(toTensor(s.reply(onLive, 0).value()), X(0) + X(1)));
  ASSERT_TRUE(s.reply(oldValue, 2).has_value());
  EXPECT_TRUE(at::equal(toTensor(s.reply(oldValue, 2).value()), X(2)));
  ASSERT_TRUE(s.reply(slice, 1).has_value());
  EXPECT_TRUE(at::equal(toTensor(s.reply(slice, 1).value()), at::full({2}, 2.f)));
  // What needs rank 3: supervision errors naming it.
  expectSupervision(s.reply(onBroken, 2), 3);
  expectSupervision(s.reply(allOn0, 0), 3);
  expectSupervision(s.reply(fromDead, 3), 3);
  EXPECT_TRUE(contains(s.reply(allOn0, 0).error().message(),
                       "whose process failed"))
      << s.reply(allOn0, 0).error().message();
  EXPECT_TRUE(s.c->stop().isOk());
}

TEST(TensorSupervision, AFetchOwedByAWorkerThatDiesFailsAtOnce) {
  ::setenv("MONARCH_UNRESPONSIVE_MS", "60000", 1); // only the death counts
  Session s;
  ASSERT_TRUE(s.c);
  int64_t x = makeX(s.b);
  ASSERT_TRUE(s.send().isOk());
  std::vector<int> pids = s.c->pids();
  // Stopped, it cannot answer the fetch that follows; then it dies.
  ASSERT_TRUE(stopProcess(pids[2]));
  int64_t owed = s.b.fetch(s.at[2], x);
  int64_t fine = s.b.fetch(s.at[0], x);
  ASSERT_TRUE(s.send().isOk());
  ASSERT_TRUE(s.gotReply(fine, 0));
  EXPECT_EQ(s.replies.count({owed, 2}), 0u);
  ASSERT_EQ(::kill(pids[2], SIGKILL), 0);
  auto killed = Clock::now();
  ASSERT_TRUE(s.gotReply(owed, 2));
  EXPECT_LT(Clock::now() - killed, 2s);
  expectSupervision(s.reply(owed, 2), 2);
  EXPECT_TRUE(s.hasKind(ControllerEvent::Kind::ProcFailure));
  EXPECT_TRUE(s.c->stop().isOk());
}

TEST(TensorSupervision, AnUnresponsiveWorkerFailsItsFetchesUntilItIsBack) {
  ::setenv("MONARCH_HEARTBEAT_MS", "100", 1);
  ::setenv("MONARCH_UNRESPONSIVE_MS", "1000", 1);
  Session s;
  ASSERT_TRUE(s.c);
  int64_t x = makeX(s.b);
  ASSERT_TRUE(s.send().isOk());
  std::vector<int> pids = s.c->pids();
  ASSERT_TRUE(stopProcess(pids[1]));
  auto stoppedAt = Clock::now();
  int64_t owed = s.b.fetch(s.at[1], x);
  ASSERT_TRUE(s.send().isOk());
  // Reported, naming the rank and how long; its owed fetch fails.
  ASSERT_TRUE(s.gotReply(owed, 1));
  EXPECT_LT(Clock::now() - stoppedAt, 3s);
  ASSERT_TRUE(s.hasKind(ControllerEvent::Kind::ProcUnresponsive));
  const auto &silent = s.supervision.front();
  EXPECT_EQ(silent.rank, 1);
  EXPECT_GE(silent.silentMs, 1000);
  EXPECT_TRUE(contains(silent.message, "unresponsive")) << silent.message;
  expectSupervision(s.reply(owed, 1), 1);
  EXPECT_TRUE(contains(s.reply(owed, 1).error().message(), "unresponsive"));
  // While it is silent: its new fetches fail at once, the others answer.
  int64_t again = s.b.fetch(s.at[1], x);
  int64_t other = s.b.fetch(s.at[0], x);
  ASSERT_TRUE(s.send().isOk());
  ASSERT_TRUE(s.gotReply(again, 1) && s.gotReply(other, 0));
  expectSupervision(s.reply(again, 1), 1);
  EXPECT_TRUE(s.reply(other, 0).has_value());
  // Back: reported, and it answers again, in order after what it was sent
  // while stopped; the late replies of the fetches already failed are
  // dropped, not delivered twice.
  ASSERT_EQ(::kill(pids[1], SIGCONT), 0);
  ASSERT_TRUE(s.waitFor(
      [&] { return s.hasKind(ControllerEvent::Kind::ProcResponsive); }));
  int64_t after = s.b.fetch(s.at[1], x);
  ASSERT_TRUE(s.send().isOk());
  ASSERT_TRUE(s.gotReply(after, 1));
  ASSERT_TRUE(s.reply(after, 1).has_value())
      << s.reply(after, 1).error().message();
  EXPECT_TRUE(at::equal(toTensor(s.reply(after, 1).value()), X(1)));
  EXPECT_EQ((s.replyCount[{owed, 1}]), 1);
  EXPECT_EQ((s.replyCount[{again, 1}]), 1);
  EXPECT_TRUE(s.c->failedRanks().empty());
  EXPECT_TRUE(s.c->stop().isOk());
}

TEST(TensorSupervision, AStoppedControllerFailsEverythingAtOnce) {
  ::setenv("MONARCH_UNRESPONSIVE_MS", "60000", 1);
  Session s(60s); // the default timeout: nothing may wait for it
  ASSERT_TRUE(s.c);
  int64_t x = makeX(s.b);
  ASSERT_TRUE(s.send().isOk());
  std::vector<int> pids = s.c->pids();
  ASSERT_TRUE(stopProcess(pids[0]));
  int64_t owed = s.b.fetch(s.at[0], x);
  ASSERT_TRUE(s.send().isOk());
  auto start = Clock::now();
  EXPECT_TRUE(s.c->stop().isOk());
  EXPECT_TRUE(s.c->stopped());
  // The fetch it owed is answered with an error...
  ASSERT_TRUE(s.gotReply(owed, 0));
  EXPECT_TRUE(s.reply(owed, 0).has_error());
  EXPECT_TRUE(contains(s.reply(owed, 0).error().message(), "stopped"));
  // ...an op and a fetch after stop fail at once, and next() never waits.
  s.b.fetch(s.at[1], s.b.op(0, "aten::ones", "", {val::ints({1})}));
  Status late = s.send();
  EXPECT_FALSE(late.isOk());
  EXPECT_EQ(late.code(), monarch::ErrorCode::Closed);
  EXPECT_TRUE(contains(late.message(), "stopped")) << late.message();
  EXPECT_FALSE(s.c->declare(s.b.program()).isOk());
  auto waited = Clock::now();
  EXPECT_FALSE(s.c->next(60s).has_value());
  EXPECT_LT(Clock::now() - waited, 1s);
  EXPECT_LT(Clock::now() - start, 15s); // stop() itself (SIGKILL after 5 s)
}

} // namespace
