#include "monarch/runtime/actor/ActorScheduler.h"

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <vector>

namespace monarch {

namespace {
/// One parked runner; signalled by the scheduler when it hands it work.
struct Parked {
  std::condition_variable cv;
  bool woken = false;
};
} // namespace

struct ActorScheduler::State {
  explicit State(int maxRunners, std::chrono::milliseconds idleExit)
      : maxRunners(maxRunners), idleExit(idleExit) {}

  /// The body of one runner task: runs ready work until idle for idleExit.
  void runLoop();

  const int maxRunners;
  const std::chrono::milliseconds idleExit;
  std::mutex mu;
  std::condition_variable allLeft;
  std::deque<Task> ready;
  std::vector<std::shared_ptr<Parked>> idle; // LIFO: the most recently busy runner is woken
  int runners = 0;
  bool stopping = false;
};

void ActorScheduler::State::runLoop() {
  // Shared with whoever wakes it, who notifies after unlocking.
  auto self = std::make_shared<Parked>();
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    if (stopping) {
      ready.clear();
      break;
    }
    if (ready.empty()) {
      self->woken = false;
      idle.push_back(self);
      bool woken =
          self->cv.wait_for(lock, idleExit, [&] { return self->woken; });
      if (!woken) {
        // Still listed as idle: withdraw and give the thread back to TBB.
        for (auto it = idle.begin(); it != idle.end(); ++it)
          if (*it == self) {
            idle.erase(it);
            break;
          }
        if (ready.empty() || stopping)
          break;
      }
      continue;
    }
    Task task = std::move(ready.front());
    ready.pop_front();
    lock.unlock();
    task();
    task = nullptr; // release captures before taking the lock
    lock.lock();
  }
  if (--runners == 0)
    allLeft.notify_all();
}

ActorScheduler::ActorScheduler(tbb::task_arena &arena, int maxRunners,
                               std::chrono::milliseconds idleExit)
    : arena(arena),
      state(std::make_shared<State>(maxRunners > 0 ? maxRunners : 1,
                                    idleExit)) {}

ActorScheduler::~ActorScheduler() { stop(); }

void ActorScheduler::schedule(Task task) {
  static bool legacy = std::getenv("MONARCH_EXP") != nullptr; // TEMP A/B
  if (legacy)
    return arena.enqueue(std::move(task));
  State &s = *state;
  std::shared_ptr<Parked> wake;
  bool spawn = false;
  {
    std::lock_guard<std::mutex> guard(s.mu);
    if (s.stopping)
      return;
    s.ready.push_back(std::move(task));
    if (!s.idle.empty()) {
      wake = std::move(s.idle.back());
      s.idle.pop_back();
      wake->woken = true;
    } else if (s.runners < s.maxRunners) {
      ++s.runners;
      spawn = true;
    }
    // Otherwise every runner is busy; the first to finish takes it.
  }
  if (wake) {
    wake->cv.notify_one();
  } else if (spawn) {
    arena.enqueue([keep = state] { keep->runLoop(); });
  }
}

bool ActorScheduler::stop(std::chrono::milliseconds timeout) {
  State &s = *state;
  std::unique_lock<std::mutex> lock(s.mu);
  s.stopping = true;
  s.ready.clear();
  for (auto &p : s.idle) {
    p->woken = true;
    p->cv.notify_one();
  }
  s.idle.clear();
  return s.allLeft.wait_for(lock, timeout, [&] { return s.runners == 0; });
}

} // namespace monarch
