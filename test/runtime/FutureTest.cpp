//===- FutureTest.cpp - Future::get polls, then sleeps --------------------===//
#include "monarch/runtime/actor/Future.h"

#include <gtest/gtest.h>

#include <thread>

namespace monarch {
namespace {

using namespace std::chrono_literals;

/// Restores the process-wide poll time when a test ends.
class PollTime {
public:
  explicit PollTime(std::chrono::microseconds t) : saved(futurePollTime()) {
    setFuturePollTime(t);
  }
  ~PollTime() { setFuturePollTime(saved); }

private:
  std::chrono::microseconds saved;
};

TEST(Future, CompletedBeforeDuringOrAfterThePollIsReturned) {
  for (auto poll : {0us, 50us, 200000us}) {
    PollTime setting(poll);
    Promise<int> before;
    before.set(1);
    EXPECT_EQ(*before.future().get(1s), 1);
    // Completed by another thread a little later: within a long poll, after
    // a short one (the getter sleeps and is woken).
    for (auto delay : {0ms, 1ms, 20ms}) {
      Promise<int> later;
      std::thread completer([&] {
        std::this_thread::sleep_for(delay);
        later.set(7);
      });
      auto got = later.future().get(10s);
      completer.join();
      ASSERT_TRUE(got.ok()) << got.status().toString();
      EXPECT_EQ(*got, 7);
    }
  }
}

TEST(Future, PollingNeverOutlastsTheTimeout) {
  PollTime setting(std::chrono::microseconds(30s));
  Promise<int> never;
  auto start = std::chrono::steady_clock::now();
  auto got = never.future().get(20ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), ErrorCode::Timeout);
}

TEST(Future, ErrorsPassThroughThePoll) {
  Promise<int> failing;
  std::thread completer(
      [&] { failing.set(Status(ErrorCode::Remote, "handler raised")); });
  auto got = failing.future().get(10s);
  completer.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), ErrorCode::Remote);
  EXPECT_EQ(got.status().message(), "handler raised");
}

} // namespace
} // namespace monarch
