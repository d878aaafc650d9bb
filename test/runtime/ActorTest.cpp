//===- ActorTest.cpp - Actors on real worker processes: adverbs, slicing --===//
#include "TestSupport.h"

#include "monarch/runtime/proc/InProcessLauncher.h"
#include "monarch/runtime/util/Polling.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <tbb/task_arena.h>

namespace monarch::test {
namespace {

using namespace std::chrono_literals;

/// One 2x2 proc mesh shared by the adverb tests (spawning is the slow part).
class Adverbs : public testing::Test {
protected:
  static void SetUpTestSuite() {
    auto spawned = thisHost().spawnProcs({{"host", 2}, {"gpu", 2}},
                                         testProcOptions("adverbs"));
    ASSERT_TRUE(spawned.ok()) << spawned.status().toString();
    procs = std::make_unique<ProcMesh>(std::move(*spawned));
    auto echo = procs->spawn("echo", "Echo");
    ASSERT_TRUE(echo.ok()) << echo.status().toString();
    actors = std::make_unique<ActorMesh>(std::move(*echo));
  }
  static void TearDownTestSuite() {
    actors.reset();
    if (procs)
      EXPECT_TRUE(procs->stop().isOk());
    procs.reset();
  }
  void SetUp() override {
    if (!actors)
      GTEST_SKIP() << "spawning failed";
  }
  static std::unique_ptr<ProcMesh> procs;
  static std::unique_ptr<ActorMesh> actors;
};
std::unique_ptr<ProcMesh> Adverbs::procs;
std::unique_ptr<ActorMesh> Adverbs::actors;

TEST_F(Adverbs, CallReturnsValueMeshByCoordinates) {
  auto result = actors->call<int64_t>("rank").get(10s);
  ASSERT_TRUE(result.ok()) << result.status().toString();
  ASSERT_EQ(result->size(), 4u);
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_EQ((*result)[r], r);
  EXPECT_EQ(result->at({1, 0}), 2);
  EXPECT_EQ(result->at({0, 1}), 1);
  auto sum = actors->call<int64_t>("add", int64_t{40}, int64_t{2}).get(10s);
  ASSERT_TRUE(sum.ok());
  for (auto v : *sum)
    EXPECT_EQ(v, 42);
}

TEST_F(Adverbs, EveryRankRunsInItsOwnProcess) {
  auto pids = actors->call<int64_t>("pid").get(10s);
  ASSERT_TRUE(pids.ok());
  std::set<int64_t> distinct(pids->begin(), pids->end());
  EXPECT_EQ(distinct.size(), 4u);
  auto launched = procs->pids();
  for (int64_t pid : distinct)
    EXPECT_NE(std::find(launched.begin(), launched.end(), pid), launched.end());
}

TEST_F(Adverbs, CallOneNeedsExactlyOneRank) {
  auto many = actors->callOne<int64_t>("rank").get(10s);
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.status().code(), ErrorCode::Invalid);
  auto one = actors->slice("host", 1)->slice("gpu", 0);
  ASSERT_TRUE(one.ok());
  auto rank = one->callOne<int64_t>("rank").get(10s);
  ASSERT_TRUE(rank.ok()) << rank.status().toString();
  EXPECT_EQ(*rank, 2);
}

TEST_F(Adverbs, SliceMessagesOnlyItsRanks) {
  auto host1 = actors->slice("host", 1);
  ASSERT_TRUE(host1.ok());
  auto ranks = host1->call<int64_t>("rank").get(10s);
  ASSERT_TRUE(ranks.ok());
  EXPECT_EQ(ranks->values(), (std::vector<int64_t>{2, 3}));
  auto column = actors->slice("gpu", mesh::Range{1, 2, 1});
  ASSERT_TRUE(column.ok());
  auto col = column->call<int64_t>("rank").get(10s);
  ASSERT_TRUE(col.ok());
  EXPECT_EQ(col->values(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(col->at({1, 0}), 3);
  EXPECT_FALSE(actors->slice("host", 2).ok());
  EXPECT_FALSE(actors->slice("nope", 0).ok());
}

TEST_F(Adverbs, ChooseRotatesOverRanks) {
  std::set<int64_t> seen;
  for (int i = 0; i < 8; ++i) {
    auto r = actors->choose<int64_t>("rank").get(10s);
    ASSERT_TRUE(r.ok());
    seen.insert(*r);
  }
  EXPECT_EQ(seen.size(), 4u);
}

TEST_F(Adverbs, StreamGivesOneFuturePerRank) {
  auto futures = actors->stream<int64_t>("rank");
  ASSERT_EQ(futures.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    auto v = futures[r].get(10s);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, r);
  }
}

TEST_F(Adverbs, FutureCallbacksAndTimeouts) {
  auto slow = actors->slice("host", 0)->slice("gpu", 0)->callOne<int64_t>(
      "sleepMs", int64_t{300});
  auto early = slow.get(10ms);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), ErrorCode::Timeout);
  std::mutex mu;
  std::condition_variable cv;
  int64_t seen = -1;
  slow.then([&](const Expected<int64_t> &v) {
    std::lock_guard<std::mutex> g(mu);
    seen = v.ok() ? *v : -2;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return seen != -1; }));
  EXPECT_EQ(seen, 300);
  // A callback registered after completion runs at once.
  bool ran = false;
  slow.then([&](const Expected<int64_t> &) { ran = true; });
  EXPECT_TRUE(ran);
}

TEST_F(Adverbs, EndpointErrorReturnsToCallerAndActorSurvives) {
  auto failed =
      actors->call<int64_t>("fail", std::string("bad input")).get(10s);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), ErrorCode::Remote);
  EXPECT_NE(failed.status().message().find("bad input"), std::string::npos);
  EXPECT_NE(failed.status().message().find("echo["), std::string::npos);
  auto after =
      actors->call<std::string>("echo", std::string("still here")).get(10s);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[3], "still here");
}

TEST_F(Adverbs, UnknownEndpointAndWrongArgumentsAreErrors) {
  auto unknown = actors->call<int64_t>("nope").get(10s);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no endpoint 'nope'"),
            std::string::npos);
  auto wrong = actors->call<int64_t>("add", std::string("x")).get(10s);
  ASSERT_FALSE(wrong.ok());
  auto wrongType = actors->call<std::string>("rank").get(10s);
  ASSERT_FALSE(wrongType.ok());
  EXPECT_EQ(wrongType.status().code(), ErrorCode::Invalid);
}

TEST_F(Adverbs, BlobsTravelAsPayloadFrames) {
  std::string bytes(1 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 7);
  Blob blob{Buffer::fromString(bytes)};
  auto sizes = actors->call<int64_t>("blobSize", blob).get(10s);
  ASSERT_TRUE(sizes.ok()) << sizes.status().toString();
  for (auto s : *sizes)
    EXPECT_EQ(s, 1 << 20);
  auto back = actors->call<Blob>("blobEcho", blob).get(10s);
  ASSERT_TRUE(back.ok());
  for (const auto &b : *back)
    EXPECT_EQ(b.buffer.toString(), bytes);
  auto v =
      actors->callOne<std::vector<int64_t>>("vec", std::vector<int64_t>{1, 2});
  EXPECT_FALSE(v.get(10s).ok()); // 4 ranks: call_one refuses
}

TEST(Actors, ConstructorRunsBeforeFirstEndpoint) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("ctor"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  auto mesh =
      procs->spawn("c", "Constructed", std::string("trainer"), int64_t{7});
  ASSERT_TRUE(mesh.ok()) << mesh.status().toString();
  auto labels = mesh->call<std::string>("describe").get(10s);
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ((*labels)[0], "trainer:7@0");
  EXPECT_EQ((*labels)[1], "trainer:7@1");

  auto failing = procs->spawn("f", "FailingConstructor");
  ASSERT_FALSE(failing.ok());
  EXPECT_NE(failing.status().message().find("constructor refused"),
            std::string::npos);
  auto unknown = procs->spawn("u", "NoSuchClass");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("NoSuchClass"), std::string::npos);
  auto duplicate =
      procs->spawn("c", "Constructed", std::string("x"), int64_t{1});
  EXPECT_FALSE(duplicate.ok());
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Actors, BroadcastIsOrderedBeforeLaterCalls) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("bcast"));
  ASSERT_TRUE(procs.ok());
  auto counters = procs->spawn("counters", "Counter", int64_t{100});
  ASSERT_TRUE(counters.ok());
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(counters->broadcast("bump", int64_t{1}).isOk());
  auto values = counters->call<int64_t>("get").get(10s);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(values->values(), (std::vector<int64_t>{150, 150}));
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Actors, TcpTransportWorks) {
  auto options = testProcOptions("tcp");
  options.transport = "tcp";
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, options);
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  auto echo = procs->spawn("echo", "Echo");
  ASSERT_TRUE(echo.ok());
  auto r = echo->call<std::string>("echo", std::string("over tcp")).get(10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[1], "over tcp");
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Actors, WrongShapeAndMissingWorkerAreErrors) {
  EXPECT_FALSE(thisHost().spawnProcs({{"gpu", 0}}).ok());
  auto options = testProcOptions();
  options.workerPath = "/nonexistent/monarch-worker";
  auto procs = thisHost().spawnProcs({{"gpu", 1}}, options);
  ASSERT_FALSE(procs.ok());
  EXPECT_EQ(procs.status().code(), ErrorCode::NotFound);
}

} // namespace
} // namespace monarch::test

namespace monarch::test {
namespace {

TEST(Actors, EndpointsMessageMeshesTheActorHolds) {
  auto procs = thisHost().spawnProcs({{"gpu", 1}}, testProcOptions("outer"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  auto relay =
      procs->spawn("relay", "Relay", std::string(MONARCH_TEST_ACTORS_LIB));
  ASSERT_TRUE(relay.ok()) << relay.status().toString();
  for (int i = 0; i < 3; ++i) {
    auto joined = relay->callOne<std::string>("relay", std::string("hi"))
                      .get(std::chrono::seconds(20));
    ASSERT_TRUE(joined.ok()) << joined.status().toString();
    EXPECT_EQ(*joined, "hi;hi;");
  }
  auto rank = relay->callOne<int64_t>("broadcastThenCall", int64_t{50})
                  .get(std::chrono::seconds(20));
  ASSERT_TRUE(rank.ok()) << rank.status().toString();
  EXPECT_EQ(*rank, 1);
  EXPECT_TRUE(procs->stop().isOk());
}

/// Where an ownThread() actor ran: its constructor's and destructor's
/// threads (set by the actor, read by the test).
std::mutex boundMu;
std::thread::id boundConstructedOn, boundDestroyedOn;

class ThreadBound : public Actor {
public:
  ThreadBound() {
    std::lock_guard<std::mutex> guard(boundMu);
    boundConstructedOn = std::this_thread::get_id();
  }
  ~ThreadBound() override {
    std::lock_guard<std::mutex> guard(boundMu);
    boundDestroyedOn = std::this_thread::get_id();
  }
  /// Whether this handler runs on the constructor's thread, and not on a
  /// worker of a TBB arena.
  bool onConstructorsThread() {
    std::lock_guard<std::mutex> guard(boundMu);
    return std::this_thread::get_id() == boundConstructedOn &&
           tbb::this_task_arena::current_thread_index() ==
               tbb::task_arena::not_initialized;
  }
};
const bool threadBoundRegistered =
    ActorClass<ThreadBound>("test.ThreadBound")
        .ownThread()
        .endpoint("onConstructorsThread", &ThreadBound::onConstructorsThread)
        .install();

TEST(Actors, AnOwnThreadActorLivesOnOneThreadOutsideTheArena) {
  auto options = testProcOptions("ownthread");
  options.launcher = std::make_shared<InProcessLauncher>();
  auto procs = thisHost().spawnProcs({{"gpu", 1}}, options);
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  auto bound = procs->spawn("bound", "test.ThreadBound");
  ASSERT_TRUE(bound.ok()) << bound.status().toString();
  // Many calls in flight at once: each still runs on the actor's thread.
  std::vector<Future<bool>> calls;
  for (int i = 0; i < 200; ++i)
    calls.push_back(bound->callOne<bool>("onConstructorsThread"));
  for (auto &call : calls) {
    auto on = call.get(10s);
    ASSERT_TRUE(on.ok()) << on.status().toString();
    EXPECT_TRUE(*on);
  }
  std::thread::id constructedOn;
  {
    std::lock_guard<std::mutex> guard(boundMu);
    constructedOn = boundConstructedOn;
  }
  EXPECT_NE(constructedOn, std::this_thread::get_id());
  // Stopping the in-process proc destroys the actor -- on its own thread.
  EXPECT_TRUE(procs->stop().isOk());
  std::lock_guard<std::mutex> guard(boundMu);
  EXPECT_EQ(boundDestroyedOn, constructedOn);
}

/// An ownThread() actor with work of its own between messages: idle()
/// blocks until wake(), as the Python actor's event loop does.
class Idler : public Actor {
public:
  void idle() override {
    std::unique_lock<std::mutex> lock(mu);
    ++idles;
    onOwnThread = onOwnThread && std::this_thread::get_id() == thread;
    cv.wait(lock, [&] { return woken; });
    woken = false;
  }
  void wake() override {
    std::lock_guard<std::mutex> guard(mu);
    woken = true;
    cv.notify_all();
  }
  /// How many times idle() ran, and whether always on the actor's thread.
  std::vector<int64_t> idleRuns() {
    std::lock_guard<std::mutex> guard(mu);
    return {idles, onOwnThread ? 1 : 0};
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  bool woken = false;
  int64_t idles = 0;
  bool onOwnThread = true;
  std::thread::id thread = std::this_thread::get_id(); // the constructor's
};
const bool idlerRegistered = ActorClass<Idler>("test.Idler")
                                 .ownThread()
                                 .endpoint("idleRuns", &Idler::idleRuns)
                                 .install();

TEST(Actors, AnIdleActorIsWokenByEachMessage) {
  auto options = testProcOptions("idler");
  options.launcher = std::make_shared<InProcessLauncher>();
  auto procs = thisHost().spawnProcs({{"gpu", 1}}, options);
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  auto idler = procs->spawn("idler", "test.Idler");
  ASSERT_TRUE(idler.ok()) << idler.status().toString();
  // Without polling the actor goes idle as soon as its mailbox is empty, so
  // calls find it inside idle(), which only wake() ends; run until it has
  // idled five times (a call that wake() did not reach would time out).
  auto pollBefore = pollTime(PollSite::Actor);
  setPollTime(PollSite::Actor, 0us);
  int64_t idles = 0;
  auto until = std::chrono::steady_clock::now() + 20s;
  while (idles < 5 && std::chrono::steady_clock::now() < until) {
    auto runs = idler->callOne<std::vector<int64_t>>("idleRuns").get(10s);
    ASSERT_TRUE(runs.ok()) << runs.status().toString();
    EXPECT_EQ((*runs)[1], 1) << "idle() ran off the actor's thread";
    idles = (*runs)[0];
  }
  setPollTime(PollSite::Actor, pollBefore);
  EXPECT_GE(idles, 5) << "idle() did not run between messages";
  // Stopping wakes it too (the destructor's exit wakes an idling actor).
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(Actors, InProcessProcsRunTheSameActorPath) {
  auto options = testProcOptions("inprocess");
  options.launcher = std::make_shared<InProcessLauncher>();
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, options);
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  auto echo = procs->spawn("echo", "Echo");
  ASSERT_TRUE(echo.ok()) << echo.status().toString();
  auto ranks = echo->call<int64_t>("rank").get(std::chrono::seconds(10));
  ASSERT_TRUE(ranks.ok());
  EXPECT_EQ(ranks->values(), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(procs->stop().isOk());
}

} // namespace
} // namespace monarch::test

namespace monarch::test {
namespace {

std::string readProcFile(int pid, const char *name) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    out.append(buf, n);
  std::fclose(f);
  return out;
}

TEST(Security, SecretIsNeitherOnTheCommandLineNorInTheEnvironment) {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("secret"));
  ASSERT_TRUE(procs.ok());
  const std::string &secret = Runtime::global().secret();
  ASSERT_EQ(secret.size(), 32u);
  for (int pid : procs->pids()) {
    std::string cmdline = readProcFile(pid, "cmdline");
    std::string environ = readProcFile(pid, "environ");
    ASSERT_FALSE(cmdline.empty());
    EXPECT_EQ(cmdline.find(secret), std::string::npos);
    EXPECT_EQ(environ.find(secret), std::string::npos);
  }
  EXPECT_TRUE(procs->stop().isOk());
}

} // namespace
} // namespace monarch::test
