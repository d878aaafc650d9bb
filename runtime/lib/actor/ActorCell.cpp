#include "monarch/runtime/actor/ActorCell.h"

#include "monarch/runtime/util/Log.h"
#include "monarch/runtime/util/Polling.h"

#include <condition_variable>
#include <thread>

namespace monarch {

namespace {
/// Sets the thread's actor context for the duration of a handler.
class ContextScope {
public:
  explicit ContextScope(const ActorContext *ctx) {
    Actor::setCurrentContext(ctx);
  }
  ~ContextScope() { Actor::setCurrentContext(nullptr); }
};

std::string describe(const ActorContext &ctx) {
  return ctx.mesh + "[" + std::to_string(ctx.rank) + "]";
}
} // namespace

/// The thread of a cell whose class is ownThread(). It outlives the cell
/// when the cell's last reference drops on the thread itself (the drain it
/// ran held one): then the thread is detached and ends, touching only this.
struct ActorCell::OwnThread {
  std::mutex mu;
  std::condition_variable cv;
  /// A drain to run, holding the cell alive until it ran.
  std::shared_ptr<ActorCell> pending;
  /// Set by the cell's destructor: runs on the thread before it ends.
  std::function<void()> last;
  bool exiting = false;
  /// The actor whose idle() runs now (wake() it when a message comes).
  Actor *idling = nullptr;
  std::thread thread;

  static void loop(std::shared_ptr<OwnThread> self) {
    for (;;) {
      std::shared_ptr<ActorCell> cell;
      {
        std::unique_lock<std::mutex> lock(self->mu);
        self->cv.wait(lock, [&] { return self->pending || self->exiting; });
        if (!self->pending)
          break;
        cell = std::move(self->pending);
      }
      cell->drain();
      cell->idle(*self);
      // Dropping `cell` here may destroy it (on this thread).
    }
    std::function<void()> last;
    {
      std::lock_guard<std::mutex> guard(self->mu);
      last = std::move(self->last);
    }
    if (last)
      last();
  }
};

ActorCell::ActorCell(tbb::task_arena &arena, const ActorClassInfo &cls,
                     ActorContext context, StopObserver onStop,
                     std::shared_ptr<Poller> poller)
    : arena(arena), cls(cls), ctx(std::move(context)),
      onStop(std::move(onStop)), poller(std::move(poller)) {
  if (cls.ownThread) {
    own = std::make_shared<OwnThread>();
    own->thread = std::thread(&OwnThread::loop, own);
  }
}

void ActorCell::idle(OwnThread &thread) {
  // Until the next message: the actor's own work, if it has some (Actor::idle).
  if (!instance || stopped())
    return;
  {
    std::lock_guard<std::mutex> guard(thread.mu);
    if (thread.pending || thread.exiting)
      return;
    thread.idling = instance.get();
  }
  {
    ContextScope scope(&ctx);
    try {
      instance->idle();
    } catch (const std::exception &e) {
      log::error("actor ", describe(ctx), ": idle work failed: ", e.what());
    }
  }
  std::lock_guard<std::mutex> guard(thread.mu);
  thread.idling = nullptr;
}

ActorCell::~ActorCell() {
  if (!own)
    return;
  bool onOwnThread = std::this_thread::get_id() == own->thread.get_id();
  {
    std::lock_guard<std::mutex> guard(own->mu);
    own->exiting = true;
    if (own->idling)
      own->idling->wake();
    // The actor is destroyed on its thread, like everything else it ran.
    if (!onOwnThread)
      own->last = [this] { instance.reset(); };
  }
  own->cv.notify_all();
  if (onOwnThread) {
    instance.reset();
    own->thread.detach();
  } else {
    own->thread.join();
  }
}

bool ActorCell::stopped() const {
  std::lock_guard<std::mutex> guard(stateMu);
  return isStopped;
}

void ActorCell::enqueue(Work work) {
  mailbox.push(std::move(work));
  if (queued.fetch_add(1, std::memory_order_acq_rel) == 0) {
    auto self = shared_from_this();
    if (own) {
      {
        std::lock_guard<std::mutex> guard(own->mu);
        own->pending = std::move(self);
        if (own->idling)
          own->idling->wake();
      }
      own->cv.notify_one();
    } else {
      arena.enqueue([self] { self->drain(); });
    }
  }
}

void ActorCell::drain() {
  // Handle everything that is queued; the counter tells whether a message
  // arrived after the queue looked empty, in which case this task continues.
  do {
    {
      Work work;
      while (!mailbox.try_pop(work)) {
        // The counter was bumped before the push became visible; spin.
      }
      if (work.call)
        run(*work.call, work.sink);
      else
        work.other();
    } // the call (and its flow-control credit) is released before polling
    if (queued.load(std::memory_order_acquire) == 1)
      awaitNext();
  } while (queued.fetch_sub(1, std::memory_order_acq_rel) > 1);
}

void ActorCell::awaitNext() {
  // A call is often followed by the next one within one round trip; keeping
  // this worker for that long spares a TBB wake-up (tens of microseconds
  // when the worker has left the arena), and running the io loop meanwhile
  // (the poller) reads that next call on this thread, with no hand-off from
  // the io thread. One cell per process polls at a time, so a cast to many
  // local actors never holds many workers idle.
  static std::atomic<bool> somebodyPolls{false};
  auto budget = pollTime(PollSite::Actor);
  if (budget.count() <= 0 || somebodyPolls.exchange(true))
    return;
  pollWith(poller.get(), budget,
           [&] { return queued.load(std::memory_order_acquire) > 1; });
  somebodyPolls.store(false);
}

void ActorCell::construct(std::shared_ptr<const Invocation> args,
                          std::function<void(Status)> done) {
  enqueue({nullptr, nullptr, [this, args, done] {
             ContextScope scope(&ctx);
             Status status;
             try {
               if (!cls.factory)
                 throw std::runtime_error(
                     "actor class " + cls.name +
                     " has no constructor<...>() declared");
               instance = cls.factory(args->args, args->payloads);
             } catch (const std::exception &e) {
               status =
                   Status(ErrorCode::Remote, "constructor of " + describe(ctx) +
                                                 " failed: " + e.what());
             } catch (...) {
               status = Status(ErrorCode::Remote,
                               "constructor of " + describe(ctx) + " failed");
             }
             if (!status.isOk()) {
               std::lock_guard<std::mutex> guard(stateMu);
               isStopped = true;
               stopReason = status.message();
             }
             done(status);
           }});
}

void ActorCell::post(std::shared_ptr<const Invocation> call, ReplySink sink) {
  enqueue({std::move(call), std::move(sink), nullptr});
}

void ActorCell::run(const Invocation &call, const ReplySink &sink) {
  HandlerResult result;
  result.rank = ctx.rank;
  {
    std::lock_guard<std::mutex> guard(stateMu);
    if (isStopped) {
      if (sink) {
        result.status =
            Status(ErrorCode::Supervision,
                   "actor " + describe(ctx) + " is stopped: " + stopReason);
        sink(std::move(result));
      }
      return;
    }
  }
  auto it = cls.endpoints.find(call.endpoint);
  if (it == cls.endpoints.end()) {
    result.status = Status(ErrorCode::NotFound, "actor class " + cls.name +
                                                    " has no endpoint '" +
                                                    call.endpoint + "'");
  } else {
    ContextScope scope(&ctx);
    try {
      it->second(*instance, call.args, call.payloads, result.value,
                 result.payloads);
    } catch (const std::exception &e) {
      result.status = Status(ErrorCode::Remote, e.what());
    } catch (...) {
      result.status = Status(ErrorCode::Remote, "unknown exception");
    }
  }
  if (sink) {
    sink(std::move(result));
  } else if (!result.status.isOk() && cls.system) {
    log::error("system actor ", describe(ctx), " ignored a broadcast to '",
               call.endpoint, "' that failed: ", result.status.message());
  } else if (!result.status.isOk()) {
    stop("endpoint '" + call.endpoint + "' failed: " + result.status.message());
  }
}

void ActorCell::stop(const std::string &reason) {
  {
    std::lock_guard<std::mutex> guard(stateMu);
    if (isStopped)
      return;
    isStopped = true;
    stopReason = reason;
  }
  log::error("actor ", describe(ctx), " stopped: ", reason);
  instance.reset();
  if (onStop)
    onStop(ctx, reason);
}

} // namespace monarch
