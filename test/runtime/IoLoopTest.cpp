//===- IoLoopTest.cpp - Lending a runtime's io context to waiting threads -===//
#include "monarch/runtime/proc/IoLoop.h"

#include <asio.hpp>
#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

namespace monarch {
namespace {

using namespace std::chrono_literals;

/// An io context run by an IoLoop on its own thread, as a Runtime does.
class LoopFixture : public ::testing::Test {
protected:
  void SetUp() override {
    ioThread = std::thread([this] { loop.run(); });
  }
  void TearDown() override {
    work.reset();
    loop.stop();
    ioThread.join();
  }
  /// Runs `fn` on whichever thread holds the io context; waits for it.
  template <typename Fn> void onIo(Fn fn) {
    std::promise<void> done;
    asio::post(io, [&] {
      fn();
      done.set_value();
    });
    ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  }

  asio::io_context io{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>>
      work{asio::make_work_guard(io)};
  IoLoop loop{io};
  std::thread ioThread;
};

TEST_F(LoopFixture, AWaitingThreadRunsTheHandlerThatMakesItReady) {
  std::atomic<bool> ready{false};
  std::atomic<std::thread::id> ranOn{};
  std::thread waiter(
      [&] { EXPECT_TRUE(loop.pollUntil([&] { return ready.load(); }, 10s)); });
  // Once lent, the io thread is parked: only the waiter can run a handler.
  auto lentBy = std::chrono::steady_clock::now() + 10s;
  while (!loop.lent() && !ready && std::chrono::steady_clock::now() < lentBy)
    std::this_thread::yield();
  ASSERT_TRUE(loop.lent());
  asio::post(io, [&] {
    ranOn = std::this_thread::get_id();
    EXPECT_TRUE(IoLoop::onIoThread());
    ready = true;
  });
  auto waiterId = waiter.get_id();
  waiter.join();
  EXPECT_EQ(ranOn.load(), waiterId);
  EXPECT_FALSE(IoLoop::onIoThread());
  // Given back: the io thread runs handlers again.
  std::thread::id after;
  onIo([&] { after = std::this_thread::get_id(); });
  EXPECT_EQ(after, ioThread.get_id());
}

TEST_F(LoopFixture, HandlersNeverRunOnTwoThreadsAtOnce) {
  constexpr int kHandlers = 20000;
  std::atomic<int> inside{0}, overlaps{0}, ran{0};
  std::vector<std::thread> borrowers;
  for (int b = 0; b < 3; ++b)
    borrowers.emplace_back([&] {
      while (ran.load() < kHandlers)
        loop.pollUntil([] { return false; }, 30us);
    });
  for (int i = 0; i < kHandlers; ++i)
    asio::post(io, [&] {
      if (inside.fetch_add(1) != 0)
        overlaps.fetch_add(1);
      inside.fetch_sub(1);
      ran.fetch_add(1);
    });
  for (auto &t : borrowers)
    t.join();
  EXPECT_EQ(ran.load(), kHandlers);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST_F(LoopFixture, ABorrowNeverOutlastsItsBudget) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(loop.pollUntil([] { return false; }, 20ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_FALSE(loop.lent());
  std::thread::id after;
  onIo([&] { after = std::this_thread::get_id(); });
  EXPECT_EQ(after, ioThread.get_id());
}

TEST_F(LoopFixture, AHandlerThatWaitsPollsWithoutTakingTheLoopAgain) {
  // On the thread that runs the io context a nested wait must not borrow:
  // it would wait for itself.
  bool nested = true;
  onIo([&] { nested = loop.pollUntil([] { return false; }, 1ms); });
  EXPECT_FALSE(nested);
}

TEST(IoLoop, StopWaitsForTheBorrowerAndEndsTheIoThread) {
  asio::io_context io{1};
  auto work = asio::make_work_guard(io);
  IoLoop loop{io};
  std::thread ioThread([&] { loop.run(); });
  std::thread waiter([&] { loop.pollUntil([] { return false; }, 300ms); });
  while (!loop.lent())
    std::this_thread::yield();
  auto stopped = std::async(std::launch::async, [&] { loop.stop(); });
  ASSERT_EQ(stopped.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(loop.lent());
  waiter.join();
  auto joined = std::async(std::launch::async, [&] { ioThread.join(); });
  EXPECT_EQ(joined.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(io.stopped());
  // After stop, a waiter polls the plain way and never touches the context.
  EXPECT_FALSE(loop.pollUntil([] { return false; }, 1ms));
}

} // namespace
} // namespace monarch
