#include "monarch/runtime/proc/IoLoop.h"

#include "monarch/runtime/util/Log.h"

#include <asio.hpp>

#include <cstdlib>
#include <exception>
#include <string>

namespace monarch {

namespace {
thread_local bool runsIo = false;

/// Marks the thread as running an io context for its scope.
class RunsIoScope {
public:
  RunsIoScope() : previous(runsIo) { runsIo = true; }
  ~RunsIoScope() { runsIo = previous; }

private:
  bool previous;
};

using Clock = std::chrono::steady_clock;

/// Runs `step` (a poll or run_one of the io context). Handlers return
/// errors as values; one that throws ends the process, on a borrower as on
/// the io thread, rather than unwinding into the caller that lent it a
/// thread.
template <typename Step> size_t runHandlers(Step step) {
  try {
    return step();
  } catch (const std::exception &e) {
    log::error("io handler threw: ", e.what());
  } catch (...) {
    log::error("io handler threw a non-standard exception");
  }
  std::terminate();
}
} // namespace

IoLoop::IoLoop(asio::io_context &io)
    : io(io), lending([] {
        const char *env = std::getenv("MONARCH_IO_LEND");
        return !(env && std::string(env) == "0");
      }()) {}

bool IoLoop::onIoThread() { return runsIo; }

void IoLoop::run() {
  RunsIoScope scope;
  auto lastWork = Clock::now();
  for (;;) {
    int s = state.load(std::memory_order_acquire);
    if (s == Stopping || io.stopped())
      return;
    if (s == Requested) {
      // The borrower may take its request back meanwhile: only a request
      // still standing is granted.
      if (state.compare_exchange_strong(s, Lent, std::memory_order_seq_cst))
        parkWhileLent();
      lastWork = Clock::now();
      continue;
    }
    if (runHandlers([&] { return io.poll(); }) > 0) {
      lastWork = Clock::now();
      continue;
    }
    if (Clock::now() - lastWork < pollTime(PollSite::IoThread)) {
      std::this_thread::yield();
      continue;
    }
    // Block in epoll_wait. A borrower that asks from here on sees ioBlocked
    // and posts to wake this thread; one that asked before is seen here.
    ioBlocked.store(true, std::memory_order_seq_cst);
    if (state.load(std::memory_order_seq_cst) == Owned)
      runHandlers([&] { return io.run_one(); });
    ioBlocked.store(false, std::memory_order_seq_cst);
    lastWork = Clock::now();
  }
}

void IoLoop::parkWhileLent() {
  auto givenBack = [&] {
    return state.load(std::memory_order_seq_cst) != Lent;
  };
  // A lend lasts at most the borrower's poll budget: poll that long first.
  if (pollFor(pollTime(PollSite::IoThread), givenBack))
    return;
  std::unique_lock<std::mutex> lock(parkMu);
  ioSleeping.store(true, std::memory_order_seq_cst);
  while (!givenBack())
    parkCv.wait_for(lock, std::chrono::milliseconds(100));
  ioSleeping.store(false, std::memory_order_seq_cst);
}

bool IoLoop::pollUntil(const std::function<bool()> &ready,
                       std::chrono::microseconds budget) {
  if (ready())
    return true;
  if (budget.count() <= 0)
    return false;
  auto until = Clock::now() + budget;
  auto rest = [&] {
    return std::chrono::duration_cast<std::chrono::microseconds>(until -
                                                                 Clock::now());
  };
  int expected = Owned;
  // A thread that already runs an io context (this one or another
  // runtime's) must not take a second: its own handlers wait on it.
  if (!lending || runsIo ||
      !state.compare_exchange_strong(expected, Requested,
                                     std::memory_order_seq_cst))
    return pollFor(rest(), ready);
  if (ioBlocked.load(std::memory_order_seq_cst))
    asio::post(io, [] {}); // wakes the io thread out of epoll_wait
  bool lent = pollFor(rest(), [&] {
    return state.load(std::memory_order_acquire) == Lent || ready();
  });
  if (!lent || state.load(std::memory_order_acquire) != Lent) {
    // Ready before the io thread parked, or out of time: take the request
    // back. Failing that, the io thread has just lent it: give it back.
    expected = Requested;
    if (!state.compare_exchange_strong(expected, Owned,
                                       std::memory_order_seq_cst))
      return runLent(ready, Clock::now());
    return ready();
  }
  return runLent(ready, until);
}

bool IoLoop::runLent(const std::function<bool()> &ready,
                     Clock::time_point until) {
  bool done = ready();
  {
    RunsIoScope scope;
    int idle = 0;
    while (!done && Clock::now() < until && !io.stopped()) {
      if (runHandlers([&] { return io.poll(); }) > 0)
        idle = 0;
      else if (++idle % 8 == 0)
        std::this_thread::yield();
      done = ready();
    }
  }
  state.store(Owned, std::memory_order_seq_cst);
  if (ioSleeping.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> guard(parkMu);
    parkCv.notify_one();
  }
  return done;
}

void IoLoop::stop() {
  // Borrowers give the io context back within their budget (50 µs by
  // default); the bound only guards against a handler that never returns.
  auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    int expected = Owned;
    if (state.compare_exchange_strong(expected, Stopping,
                                      std::memory_order_seq_cst))
      break;
    if (expected == Stopping)
      break;
    if (Clock::now() > deadline) {
      log::error(
          "io loop: a borrower did not give the io context back in 10 s");
      state.store(Stopping, std::memory_order_seq_cst);
      break;
    }
    std::this_thread::yield();
  }
  io.stop();
  std::lock_guard<std::mutex> guard(parkMu);
  parkCv.notify_all();
}

} // namespace monarch
