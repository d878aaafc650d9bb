//===- Liveness.h - Heartbeats and hang detection ---------------*- C++ -*-===//
//
// A dead proc is seen at once (its pidfd, its closed connection); a stuck
// one -- SIGSTOPped, paging, held in a debugger -- closes nothing and would
// only show as its callers' timeouts. So every proc sends a heartbeat to its
// parent every `interval`, from its io thread, over a link of its own (never
// queued behind a large transfer on the data link), and the parent reports a
// proc silent for longer than `deadline` as unresponsive: a supervision
// event naming the mesh, the rank and how long it has been silent, after
// which calls to it fail at once. A heartbeat from it later reports it
// responsive again, and calls to it work again (nothing sent to it was
// lost: its connection stayed open).
//
//   worker:  HeartbeatSender::start(rt, boot)        (runWorker does it)
//   parent:  auto m = std::make_shared<LivenessMonitor>(io, n, options,
//                                                       onSilent, onBack);
//            m->heard(rank) on each Heartbeat; m->start() once all are up.
//
// Defaults: a heartbeat every 500 ms, unresponsive after 4 s of silence
// (checked every 500 ms, so a stuck proc is reported 4-4.5 s after its last
// heartbeat); $MONARCH_HEARTBEAT_MS and $MONARCH_UNRESPONSIVE_MS override
// them, SpawnProcsOptions per mesh, 0 turns it off. A check that runs late
// (the parent itself was stalled, not the procs) is skipped, so a paused
// controller does not blame its procs for its own silence.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_LIVENESS_H
#define MONARCH_RUNTIME_PROC_LIVENESS_H

#include "runtime.pb.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace asio {
class io_context;
}

namespace monarch {

class Runtime;

struct LivenessOptions {
  /// How often a proc sends a heartbeat; 0 turns liveness off.
  std::chrono::milliseconds interval{500};
  /// Silence after which a proc is reported unresponsive.
  std::chrono::milliseconds deadline{4000};
  /// The defaults above, or $MONARCH_HEARTBEAT_MS / $MONARCH_UNRESPONSIVE_MS.
  static LivenessOptions fromEnvironment();
  bool enabled() const { return interval.count() > 0 && deadline.count() > 0; }
};

/// The worker's side: sends heartbeats to the parent named in its bootstrap
/// until the process ends.
class HeartbeatSender {
public:
  /// Starts sending when the bootstrap asks for heartbeats (a no-op when
  /// it does not). The sender lives as long as the runtime's io loop runs.
  static void start(Runtime &rt, const proto::Bootstrap &boot);
};

/// The parent's side for one proc mesh. `onSilent(rank, ms)` and
/// `onBack(rank, ms)` run on the io thread (or a thread borrowing it) and
/// must not block.
class LivenessMonitor : public std::enable_shared_from_this<LivenessMonitor> {
public:
  using Report = std::function<void(uint32_t rank, int64_t silentMs)>;
  LivenessMonitor(asio::io_context &io, size_t ranks, LivenessOptions options,
                  Report onSilent, Report onBack);
  ~LivenessMonitor();

  /// A heartbeat (or any sign of life) from `rank`.
  void heard(uint32_t rank);
  /// Starts checking; every rank counts as heard now.
  void start();
  /// `rank` ended: it is no longer checked.
  void forget(uint32_t rank);
  /// Stops checking (the mesh is stopping).
  void stop();

private:
  void arm();
  void check();

  struct Timer;
  asio::io_context &io;
  /// Shared with the pending wait, so that it is destroyed on the io thread.
  std::shared_ptr<Timer> timer;
  const LivenessOptions options;
  Report onSilent, onBack;
  std::vector<std::atomic<int64_t>> lastSeen; ///< steady-clock ns
  std::vector<std::atomic<uint8_t>> state;    ///< 0 live, 1 silent, 2 gone
  int64_t lastCheck = 0;
  std::atomic<bool> stopped{false};
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_LIVENESS_H
