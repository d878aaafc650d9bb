//===- ActorScheduler.h - Runs ready mailboxes on the TBB arena -*- C++ -*-===//
//
// Actors run on the process's tbb::task_arena. Enqueuing one TBB task per
// message burst is cheap while TBB's workers are busy, but between sparse
// messages (a ping-pong) the workers spin and yield for a long time before
// sleeping, which costs most of a small machine's CPU, and a sleeping worker
// is slow to wake. So the scheduler keeps its own runners: long-lived tasks
// on the arena that take ready work from one queue and, when it is empty,
// park on a condition variable -- one futex wake away, like a thread blocked
// in read(). A runner idle for `idleExit` returns its thread to TBB; a runner
// is added (one arena task) only when work is ready and none is idle, up to
// the arena's concurrency, so a handler that blocks holds one arena thread as
// before.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_ACTOR_ACTORSCHEDULER_H
#define MONARCH_RUNTIME_ACTOR_ACTORSCHEDULER_H

#include <tbb/task_arena.h>

#include <chrono>
#include <functional>
#include <memory>

namespace monarch {

class ActorScheduler {
public:
  using Task = std::function<void()>;

  ActorScheduler(tbb::task_arena &arena, int maxRunners,
                 std::chrono::milliseconds idleExit =
                     std::chrono::milliseconds(20));
  /// Stops the runners (see stop()).
  ~ActorScheduler();
  ActorScheduler(const ActorScheduler &) = delete;
  ActorScheduler &operator=(const ActorScheduler &) = delete;

  /// Runs `task` on an arena thread: an idle runner's if there is one.
  void schedule(Task task);

  /// Drops work not yet started and waits (at most `timeout`) for the
  /// runners to leave; false if a handler was still running then.
  bool stop(std::chrono::milliseconds timeout = std::chrono::seconds(5));

private:
  struct State;
  tbb::task_arena &arena;
  std::shared_ptr<State> state;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_ACTOR_ACTORSCHEDULER_H
