//===- Runtime.h - The per-process runtime context --------------*- C++ -*-===//
//
// Every process (the controller and each worker) has one Runtime: an io
// thread driving the sockets (its io context lent for microseconds at a time
// to threads waiting for a message, IoLoop.h), the TBB arena that runs actors,
// the listener and router for incoming messages, a cache of outgoing links and
// the per-destination sequence counters that give sender->proc FIFO order.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_RUNTIME_H
#define MONARCH_RUNTIME_PROC_RUNTIME_H

#include "monarch/runtime/proc/Router.h"
#include "monarch/runtime/transport/Transport.h"
#include "monarch/runtime/util/Polling.h"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace monarch {

class IoLoop;

struct RuntimeOptions {
  /// The job secret; empty makes a new random one (the controller's case).
  std::string secret;
  /// Where to listen; empty: a Unix socket in a private (0700) directory.
  std::string listenAddr;
  std::string procId = "controller";
  /// Fan-out of the casting tree.
  uint32_t castFanout = 16;
  /// Threads of the actor arena; 0: max(4, cores).
  int arenaThreads = 0;
  /// Flow control (transport/Transport.h): bytes a link may queue and a
  /// connection may hold unhandled, and how long a send waits for room
  /// before it fails with a Timeout error instead of queueing more.
  size_t flowLimitBytes = 64u << 20;
  int sendTimeoutMs = 30000;
};

class Runtime {
public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  /// The controller's runtime, created on first use, shut down at exit.
  static Runtime &global();
  /// The runtime of this process: a worker's own runtime (set by runWorker)
  /// or, in the controller, global(). Actor handlers use it to send.
  static Runtime &ofProcess();
  /// Makes `rt` what ofProcess() returns (null: back to global()).
  static void setProcessRuntime(Runtime *rt);
  /// Options used when global() first creates the runtime.
  static void setGlobalOptions(RuntimeOptions options);

  Status start();

  transport::Transport &transport() { return *transportImpl; }
  Router &router() { return routerImpl; }
  tbb::task_arena &arena() { return *arenaImpl; }
  /// Polls while running this runtime's io context (proc/IoLoop.h): what a
  /// thread waiting for a message this runtime will receive polls with.
  std::shared_ptr<Poller> poller() const;

  const std::string &addr() const { return listenAddr; }
  const std::string &secret() const { return opts.secret; }
  const std::string &procId() const { return opts.procId; }
  /// Identity used for FIFO ordering of messages this process sends.
  const std::string &senderId() const { return sender; }
  uint32_t fanout() const { return opts.castFanout; }
  std::chrono::milliseconds sendTimeout() const {
    return std::chrono::milliseconds(opts.sendTimeoutMs);
  }
  void setFanout(uint32_t fanout) { opts.castFanout = fanout ? fanout : 1; }
  /// A 0700 directory for this process's Unix sockets (made on first use,
  /// removed with the runtime).
  const std::string &privateDir();
  /// Removes the private directory now (a worker that ends with _Exit skips
  /// the destructor that would).
  void removePrivateDir();

  /// A cached link to `addr` (a new one if the cached one closed).
  Expected<std::shared_ptr<transport::Link>> link(const std::string &addr);
  /// Next sequence number of this sender towards the proc at `addr`.
  uint64_t nextSeq(const std::string &addr);
  uint64_t peekSeq(const std::string &addr);
  /// A new proc now serves at `addr`: restart its sequence numbers and drop
  /// any cached link to the previous one.
  void resetPeer(const std::string &addr);
  /// Serializes "allocate sequence numbers, then send" so the links see
  /// messages in sequence order (receivers reorder anyway; this keeps their
  /// reorder buffers empty in the common case).
  std::mutex &sendMutex() { return sendMu; }

  /// Best-effort cleanup before the controller fails hard: ends local procs
  /// and removes the global runtime's private directory.
  static void fatalCleanup();

  /// True on a runtime's io thread, where nothing may block.
  static bool onIoThread();

  /// Runs `fn` on the io thread and waits (bounded) for it.
  void runOnIo(std::function<void()> fn);

private:
  RuntimeOptions opts;
  std::unique_ptr<asio::io_context> ioImpl;
  std::unique_ptr<transport::Transport> transportImpl;
  std::unique_ptr<tbb::global_control> parallelism;
  std::unique_ptr<tbb::task_arena> arenaImpl;
  Router routerImpl;
  std::unique_ptr<transport::Listener> listener;
  std::string listenAddr;
  std::string sender;
  std::mutex dirMu;
  std::string dir;
  std::shared_ptr<IoLoop> ioLoopImpl;
  std::thread ioThread;
  struct WorkGuard;
  std::unique_ptr<WorkGuard> workGuard;

  std::mutex linksMu;
  std::unordered_map<std::string, std::shared_ptr<transport::Link>> links;
  std::mutex seqMu;
  std::unordered_map<std::string, uint64_t> seqs;
  std::mutex sendMu;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_RUNTIME_H
