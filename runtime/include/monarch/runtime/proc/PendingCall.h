//===- PendingCall.h - Controller-side state of one cast --------*- C++ -*-===//
//
// Collects the merged replies of a cast on a port of the controller, one
// outcome per actor rank, and completes futures: one for all ranks (call) and
// one per rank (stream). A failed proc fails, at once, the outstanding ranks
// whose replies pass through it (its own and, in a casting tree, those of the
// procs below it); ranks under healthy subtrees still deliver. The
// all-ranks future fails as soon as any rank fails that way, so no caller
// waits on a dead process.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_PENDINGCALL_H
#define MONARCH_RUNTIME_PROC_PENDINGCALL_H

#include "monarch/runtime/actor/Future.h"
#include "monarch/runtime/actor/Value.h"
#include "monarch/runtime/transport/Message.h"

#include <algorithm>
#include <mutex>
#include <optional>

namespace monarch {

class Runtime;

struct RankOutcome {
  uint32_t rank = 0;
  Status status;
  proto::Value value;
  std::shared_ptr<const PayloadList> payloads;
};

class PendingCall : public std::enable_shared_from_this<PendingCall> {
public:
  /// `ranks` in the caller's (view) order; `procs` the procs they live on.
  PendingCall(Runtime &rt, std::vector<uint32_t> ranks,
              std::vector<uint32_t> procs, bool perRankFutures);
  ~PendingCall();

  /// Opens the reply port; returns its reference.
  proto::PortRef open();
  bool involvesProc(uint32_t procRank) const {
    return std::binary_search(procs.begin(), procs.end(), procRank);
  }
  /// Fails every outstanding rank.
  void fail(const Status &status);

  /// The casting tree the call travels: `targetProcs[t]` is the proc rank of
  /// target t, `parents[t]` the target t is forwarded from (-1: the caller),
  /// `targetOf[i]` the target of the i-th rank. `mesh` names the actor mesh
  /// in errors. Without routes a failed proc fails every rank.
  void setRoutes(std::string mesh, std::vector<uint32_t> targetProcs,
                 std::vector<int32_t> parents, std::vector<uint32_t> targetOf);
  /// A proc failed: fails the outstanding ranks routed through it.
  void procFailed(uint32_t procRank, const Status &status);

  Future<std::vector<RankOutcome>> all() const { return allDone.future(); }

  /// Reply messages received by all calls of this process so far: with
  /// merging, a cast costs one per first-level hop (tests, diagnostics).
  static uint64_t replyMessagesReceived();
  Future<RankOutcome> rank(size_t position) const {
    return perRank[position].future();
  }

private:
  void onReply(transport::Message &&reply);
  void finishLocked(std::unique_lock<std::mutex> &lock);
  /// Positions (in rankList) of the ranks whose replies pass through the
  /// proc; every position without routes.
  std::vector<size_t> routedThrough(uint32_t procRank) const;
  /// The outcome of the rank at `i` that failed with `status`.
  RankOutcome failedOutcome(size_t i, const Status &status) const;

  Runtime &rt;
  // Sorted vectors, not hash containers: a call is built per message, and
  // the common call has one rank on one proc.
  std::vector<uint32_t> procs; // sorted, unique
  std::vector<uint32_t> rankList;
  std::vector<std::pair<uint32_t, size_t>> position; // (rank, index), sorted
  std::mutex mu;
  std::vector<std::optional<RankOutcome>> outcomes;
  size_t remaining;
  uint64_t port = 0;
  Promise<std::vector<RankOutcome>> allDone;
  std::vector<Promise<RankOutcome>> perRank;

  std::string meshName;
  std::vector<uint32_t> targetProcs;
  std::vector<int32_t> parents;
  std::vector<uint32_t> targetOf;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_PENDINGCALL_H
