//===- IoLoop.h - An io context lent to waiting threads ---------*- C++ -*-===//
//
// The io context runs on the runtime's io thread -- and, for a bounded time,
// on a thread that waits for something the io context will deliver: a caller
// in Future::get waiting for its reply, an actor's drain task waiting for the
// next message (util/Polling.h). The waiting thread then reads, decodes and
// delivers that message itself, so a round trip crosses no thread inside a
// process: the io thread's hand-off (a wake-up, or at best a poll and the
// cache misses of moving the message to another core) is gone.
//
// Only one thread runs the io context at a time -- handlers keep the
// single-threaded model the transport relies on. A borrower asks, the io
// thread parks and lends it, the borrower gives it back after its wait; a
// borrower that cannot have it at once (another borrower, the io thread busy
// in a long handler) polls the plain way instead. MONARCH_IO_LEND=0 turns
// lending off (every waiter polls the plain way).
//
//   io thread:  Owned --(borrower asks)--> Requested --(parks)--> Lent
//   borrower:   Lent --(gives back)--> Owned;  stop(): Owned --> Stopping
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_IOLOOP_H
#define MONARCH_RUNTIME_PROC_IOLOOP_H

#include "monarch/runtime/util/Polling.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace asio {
class io_context;
}

namespace monarch {

class IoLoop : public Poller {
public:
  explicit IoLoop(asio::io_context &io);

  /// The io thread's body: runs the io context until stop(), polling for
  /// the io poll time after each handler before it blocks in epoll_wait.
  void run();
  /// Stops the loop (the io context too) once no borrower holds it (each
  /// gives it back within its budget). Nothing touches the io context after.
  void stop();

  /// Runs the io context on this thread, if it can be had, until `ready()`
  /// or `budget` passes; otherwise polls `ready` the plain way.
  bool pollUntil(const std::function<bool()> &ready,
                 std::chrono::microseconds budget) override;

  /// True on a thread running some runtime's io context: the io thread, or
  /// a borrower while it holds one.
  static bool onIoThread();
  /// Whether a borrower holds the io context now.
  bool lent() const { return state.load() == Lent; }

private:
  enum State : int { Owned, Requested, Lent, Stopping };
  /// The io thread, in state Lent: waits until the borrower gives it back.
  void parkWhileLent();
  /// The borrower, holding the io context: runs it until `ready()` or
  /// `until`, then gives it back.
  bool runLent(const std::function<bool()> &ready,
               std::chrono::steady_clock::time_point until);

  asio::io_context &io;
  const bool lending;
  std::atomic<int> state{Owned};
  /// The io thread is (about to be) blocked in epoll_wait: a borrower must
  /// post to wake it.
  std::atomic<bool> ioBlocked{false};
  std::atomic<bool> ioSleeping{false};
  std::mutex parkMu;
  std::condition_variable parkCv;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_IOLOOP_H
