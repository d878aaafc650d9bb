//===- Future.h - Completion of a remote call -------------------*- C++ -*-===//
//
// A Future is completed once, by the runtime, with a value or a Status. The
// caller either blocks with a timeout (get) or registers callbacks (then),
// which run on the thread that completes the future -- usually the io thread,
// so callbacks must be short and must not block.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_ACTOR_FUTURE_H
#define MONARCH_RUNTIME_ACTOR_FUTURE_H

#include "monarch/runtime/util/Status.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace monarch {

namespace detail {
template <typename T> struct FutureState {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Expected<T>> outcome;
  std::vector<std::function<void(const Expected<T> &)>> callbacks;
};
} // namespace detail

template <typename T> class Future;

template <typename T> class Promise {
public:
  Promise() : state(std::make_shared<detail::FutureState<T>>()) {}

  /// Completes the future; later calls are ignored (first outcome wins).
  bool set(Expected<T> outcome) const {
    std::vector<std::function<void(const Expected<T> &)>> callbacks;
    {
      std::lock_guard<std::mutex> guard(state->mu);
      if (state->outcome)
        return false;
      state->outcome.emplace(std::move(outcome));
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
  /// future stays pending and may still complete later).
  Expected<T>
  get(std::chrono::milliseconds timeout = std::chrono::seconds(60)) const {
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
    Promise<U> promise;
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
