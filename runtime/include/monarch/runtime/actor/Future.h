//===- Future.h - Completion of a remote call -------------------*- C++ -*-===//
//
// A Future is completed once, by the runtime, with a value or a Status. The
// caller either blocks with a timeout (get) or registers callbacks (then),
// which run on the thread that completes the future -- usually the io thread
// or a thread that borrowed it (proc/IoLoop.h), so callbacks must be short
// and must not block.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_ACTOR_FUTURE_H
#define MONARCH_RUNTIME_ACTOR_FUTURE_H

#include "monarch/runtime/util/Polling.h"
#include "monarch/runtime/util/Status.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace monarch {

namespace detail {
template <typename T> struct FutureState {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Expected<T>> outcome;
  /// Set (release) once `outcome` is; lets get() poll without the lock.
  std::atomic<bool> done{false};
  std::vector<std::function<void(const Expected<T> &)>> callbacks;
  /// What get() polls with: the completing runtime's io loop, or null for
  /// plain polling (util/Polling.h).
  std::shared_ptr<Poller> poller;
};
} // namespace detail

template <typename T> class Future;

/// How long Future::get polls for the outcome before it sleeps on a
/// condition variable (util/Polling.h); 0 sleeps at once.
inline void setFuturePollTime(std::chrono::microseconds t) {
  setPollTime(PollSite::Future, t);
}
inline std::chrono::microseconds futurePollTime() {
  return pollTime(PollSite::Future);
}

template <typename T> class Promise {
public:
  Promise() : state(std::make_shared<detail::FutureState<T>>()) {}
  /// A promise completed by messages `poller`'s runtime receives: a thread
  /// waiting in get() runs that runtime's io loop meanwhile (IoLoop.h).
  explicit Promise(std::shared_ptr<Poller> poller) : Promise() {
    state->poller = std::move(poller);
  }

  /// Completes the future; later calls are ignored (first outcome wins).
  bool set(Expected<T> outcome) const {
    std::vector<std::function<void(const Expected<T> &)>> callbacks;
    {
      std::lock_guard<std::mutex> guard(state->mu);
      if (state->outcome)
        return false;
      state->outcome.emplace(std::move(outcome));
      state->done.store(true, std::memory_order_release);
      callbacks.swap(state->callbacks);
    }
    state->cv.notify_all();
    for (auto &cb : callbacks)
      cb(*state->outcome);
    return true;
  }
  Future<T> future() const { return Future<T>(state); }

private:
  std::shared_ptr<detail::FutureState<T>> state;
};

template <typename T> class Future {
public:
  Future() = default;
  explicit Future(std::shared_ptr<detail::FutureState<T>> state)
      : state(std::move(state)) {}

  static Future failed(Status status) {
    Promise<T> p;
    p.set(std::move(status));
    return p.future();
  }

  bool valid() const { return state != nullptr; }
  bool ready() const {
    std::lock_guard<std::mutex> guard(state->mu);
    return state->outcome.has_value();
  }

  /// Blocks until completed or `timeout` passes (then a Timeout error; the
  /// future stays pending and may still complete later). While it polls,
  /// this thread may run the completing runtime's io handlers (IoLoop.h) --
  /// port handlers and callbacks included -- so it must not hold a lock one
  /// of them takes.
  Expected<T>
  get(std::chrono::milliseconds timeout = std::chrono::seconds(60)) const {
    // A reply often comes within a few tens of microseconds: polling that
    // long spares the completing thread a futex wake-up and this one the
    // sleep and wake, the larger part of a short round trip.
    auto budget = std::min<std::chrono::microseconds>(
        futurePollTime(),
        std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    pollWith(state->poller.get(), budget,
             [&] { return state->done.load(std::memory_order_acquire); });
    std::unique_lock<std::mutex> lock(state->mu);
    if (!state->cv.wait_for(lock, timeout,
                            [&] { return state->outcome.has_value(); }))
      return Status(ErrorCode::Timeout, "no result within " +
                                            std::to_string(timeout.count()) +
                                            " ms");
    return *state->outcome;
  }

  /// Runs `callback` on completion (at once if already complete).
  void then(std::function<void(const Expected<T> &)> callback) const {
    {
      std::lock_guard<std::mutex> guard(state->mu);
      if (!state->outcome) {
        state->callbacks.push_back(std::move(callback));
        return;
      }
    }
    callback(*state->outcome);
  }

  /// A future of `fn(value)`; errors pass through. `fn` returns Expected<U>.
  template <typename U, typename Fn> Future<U> map(Fn fn) const {
    Promise<U> promise(state->poller);
    then([promise, fn](const Expected<T> &outcome) {
      if (!outcome.ok())
        promise.set(outcome.status());
      else
        promise.set(fn(outcome.value()));
    });
    return promise.future();
  }

private:
  std::shared_ptr<detail::FutureState<T>> state;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_ACTOR_FUTURE_H
