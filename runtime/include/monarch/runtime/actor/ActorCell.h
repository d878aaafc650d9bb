//===- ActorCell.h - One actor instance and its mailbox ---------*- C++ -*-===//
//
// The cell owns the actor object and a mailbox. Posting to an idle mailbox
// enqueues one drain task on the process's TBB arena; the task handles
// messages one at a time, in mailbox order, until the mailbox is empty. So an
// actor never runs two handlers at once and no thread is parked per actor
// (beyond a bounded poll for the next message, one cell per process).
//
// An actor class declared ownThread() drains on a thread of the cell's own
// instead: the same drain, started by a wake-up of that thread rather than a
// TBB task, so the actor's constructor, handlers and destructor all run on
// one thread (the Python actor's thread state lives there). Between messages
// that thread runs the actor's idle() (Actor.h), which a new message wakes.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_ACTOR_ACTORCELL_H
#define MONARCH_RUNTIME_ACTOR_ACTORCELL_H

#include "monarch/runtime/actor/Actor.h"
#include "monarch/runtime/util/Polling.h"
#include "monarch/runtime/util/Status.h"

#include <tbb/concurrent_queue.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

namespace monarch {

/// An endpoint call shared by all local targets of one cast.
struct Invocation {
  std::string endpoint;
  proto::Value args;
  PayloadList payloads;
  /// The arriving message's flow-control credit (transport::Message), held
  /// until every local actor has handled the call.
  std::shared_ptr<const void> credit;
};

/// The outcome of one handler run, sent back to the caller.
struct HandlerResult {
  uint32_t rank = 0;
  Status status; ///< not ok: the endpoint raised (message) or was unknown
  proto::Value value;
  PayloadList payloads;
};

using ReplySink = std::function<void(HandlerResult &&)>;
/// Called once when the actor stops because a fire-and-forget handler failed.
using StopObserver =
    std::function<void(const ActorContext &, const std::string &reason)>;

class ActorCell : public std::enable_shared_from_this<ActorCell> {
public:
  /// `poller`: what the drain task polls for the next message with (the
  /// process runtime's io loop, so that message is read on the drain task's
  /// own thread); null polls the plain way.
  ActorCell(tbb::task_arena &arena, const ActorClassInfo &cls,
            ActorContext context, StopObserver onStop,
            std::shared_ptr<Poller> poller = nullptr);
  /// Ends the cell's own thread (if it has one), the actor's destructor run
  /// on it.
  ~ActorCell();
  ActorCell(const ActorCell &) = delete;
  ActorCell &operator=(const ActorCell &) = delete;

  /// Queues the constructor; `done` reports its outcome.
  void construct(std::shared_ptr<const Invocation> args,
                 std::function<void(Status)> done);
  /// Queues an endpoint call. With a sink, a failure is replied and the actor
  /// lives on; without one (broadcast) a failure stops the actor.
  void post(std::shared_ptr<const Invocation> call, ReplySink sink);

  const ActorContext &context() const { return ctx; }
  bool stopped() const;

private:
  /// One mailbox entry: an endpoint call (with its sink), or other work (the
  /// constructor). Calls are stored as they are, not wrapped in a closure,
  /// which would cost an allocation per message.
  struct Work {
    std::shared_ptr<const Invocation> call;
    ReplySink sink;
    std::function<void()> other;
  };
  void enqueue(Work work);
  void drain();
  /// With nothing queued after a handler, polls briefly for the next message
  /// before the drain task ends (util/Polling.h).
  void awaitNext();
  void run(const Invocation &call, const ReplySink &sink);
  /// On the own thread, with the mailbox empty: the actor's idle().
  struct OwnThread;
  void idle(OwnThread &thread);
  void stop(const std::string &reason);

  tbb::task_arena &arena;
  const ActorClassInfo &cls;
  ActorContext ctx;
  StopObserver onStop;
  std::shared_ptr<Poller> poller;
  std::unique_ptr<Actor> instance; // touched only by the drain task

  /// The thread of an ownThread() class (ActorCell.cpp); null otherwise.
  std::shared_ptr<OwnThread> own;

  tbb::concurrent_queue<Work> mailbox;
  std::atomic<int64_t> queued{0};

  mutable std::mutex stateMu;
  bool isStopped = false;
  std::string stopReason;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_ACTOR_ACTORCELL_H
