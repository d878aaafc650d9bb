//===- Polling.h - Bounded polling before a thread sleeps -------*- C++ -*-===//
//
// A short round trip is dominated by wake-ups: a thread asleep in epoll_wait,
// on a futex or in TBB's market costs several microseconds to wake, and a
// call crosses three such threads (the callee's io thread, the actor's TBB
// worker, the caller's io thread) plus the caller. Each of them therefore
// keeps polling for a bounded time after it last had work, yielding its core
// to anything runnable, and only then sleeps. The bound is per site and
// defaults to 50 µs: a busy conversation never sleeps, an idle process stops
// spending CPU 50 µs after its last message.
//
// MONARCH_POLL_US sets every site; MONARCH_FUTURE_POLL_US, MONARCH_IO_POLL_US
// and MONARCH_ACTOR_POLL_US set one each. 0 sleeps at once.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_UTIL_POLLING_H
#define MONARCH_RUNTIME_UTIL_POLLING_H

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <thread>

namespace monarch {

enum class PollSite {
  Future,   ///< Future::get before it sleeps on its condition variable
  IoThread, ///< a runtime's io thread before it blocks in epoll_wait
  Actor,    ///< an actor's drain task before it gives its TBB worker back
};

namespace detail {
inline int64_t pollUsFromEnv(const char *site) {
  for (const char *name : {site, "MONARCH_POLL_US"})
    if (const char *env = std::getenv(name); env && *env)
      return std::max<int64_t>(0, std::atoll(env));
  return 50;
}
inline std::atomic<int64_t> &pollUs(PollSite site) {
  static std::atomic<int64_t> future{pollUsFromEnv("MONARCH_FUTURE_POLL_US")};
  static std::atomic<int64_t> io{pollUsFromEnv("MONARCH_IO_POLL_US")};
  static std::atomic<int64_t> actor{pollUsFromEnv("MONARCH_ACTOR_POLL_US")};
  switch (site) {
  case PollSite::Future:
    return future;
  case PollSite::IoThread:
    return io;
  case PollSite::Actor:
    break;
  }
  return actor;
}
} // namespace detail

inline std::chrono::microseconds pollTime(PollSite site) {
  return std::chrono::microseconds(
      detail::pollUs(site).load(std::memory_order_relaxed));
}
inline void setPollTime(PollSite site, std::chrono::microseconds t) {
  detail::pollUs(site).store(std::max<int64_t>(0, t.count()),
                             std::memory_order_relaxed);
}

/// One short busy-wait step: a pause instruction where there is one.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Polls `ready` until it holds or `budget` has passed; returns `ready()`'s
/// last value. Between yields of the core it checks a few times with pause
/// instructions only: a yield is a system call (about a microsecond), which
/// alone would be most of the latency this polling is for.
template <typename Ready>
bool pollFor(std::chrono::microseconds budget, Ready &&ready) {
  if (ready())
    return true;
  if (budget.count() <= 0)
    return false;
  constexpr int kChecksPerYield = 32;
  auto until = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < kChecksPerYield; ++i) {
      cpuRelax();
      if (ready())
        return true;
    }
    std::this_thread::yield();
    if (ready())
      return true;
  }
  return false;
}

/// One step of a bounded wait on what a thread cannot block on (a CUDA
/// event, a peer's counter in shared memory), `waited` into it: yields the
/// core for the first 200 µs (most such waits are short), then sleeps `nap`
/// so that a long wait leaves the core to the other streams' threads.
inline void backOff(std::chrono::steady_clock::duration waited,
                    std::chrono::microseconds nap) {
  if (waited < std::chrono::microseconds(200))
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(nap);
}

/// What a waiting thread polls with. The plain one (pollFor) only checks;
/// a runtime's io loop (proc/IoLoop.h) also runs the io context on the
/// waiting thread meanwhile, so the message that makes `ready` true is read,
/// decoded and delivered there, with no hand-off from the io thread.
class Poller {
public:
  virtual ~Poller() = default;
  /// Polls until `ready()` holds or `budget` has passed; returns `ready()`.
  virtual bool pollUntil(const std::function<bool()> &ready,
                         std::chrono::microseconds budget) = 0;
};

/// Polls with `poller` where there is one, the plain way (pollFor) without.
template <typename Ready>
bool pollWith(Poller *poller, std::chrono::microseconds budget, Ready &&ready) {
  return poller ? poller->pollUntil(ready, budget) : pollFor(budget, ready);
}

} // namespace monarch

#endif // MONARCH_RUNTIME_UTIL_POLLING_H
