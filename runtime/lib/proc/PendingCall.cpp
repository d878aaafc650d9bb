#include "monarch/runtime/proc/PendingCall.h"

#include "monarch/runtime/proc/Runtime.h"

#include <atomic>

namespace monarch {

static std::atomic<uint64_t> replyMessages{0};

uint64_t PendingCall::replyMessagesReceived() { return replyMessages.load(); }

PendingCall::PendingCall(Runtime &rt, std::vector<uint32_t> ranks,
                         std::vector<uint32_t> procs, bool perRankFutures)
    : rt(rt), procs(std::move(procs)), rankList(ranks), outcomes(ranks.size()),
      remaining(ranks.size()), allDone(rt.poller()) {
  std::sort(this->procs.begin(), this->procs.end());
  this->procs.erase(std::unique(this->procs.begin(), this->procs.end()),
                    this->procs.end());
  position.reserve(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i)
    position.emplace_back(ranks[i], i);
  std::stable_sort(
      position.begin(), position.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  if (perRankFutures) {
    perRank.reserve(ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i)
      perRank.emplace_back(rt.poller()); // each its own state
  }
}

PendingCall::~PendingCall() {
  if (port)
    rt.router().closePort(port);
}

proto::PortRef PendingCall::open() {
  // The port keeps the call alive until its last reply (or its failure)
  // closes the port.
  auto self = shared_from_this();
  port = rt.router().openPort(
      [self](transport::Message &&reply) { self->onReply(std::move(reply)); });
  proto::PortRef ref;
  ref.set_addr(rt.addr());
  ref.set_port(port);
  return ref;
}

void PendingCall::onReply(transport::Message &&reply) {
  replyMessages.fetch_add(1, std::memory_order_relaxed);
  auto payloads =
      std::make_shared<const PayloadList>(std::move(reply.payloads));
  std::vector<std::pair<size_t, RankOutcome>> ready;
  std::unique_lock<std::mutex> lock(mu);
  for (auto &r : *reply.envelope.mutable_cast_reply()->mutable_results()) {
    auto it = std::lower_bound(
        position.begin(), position.end(), r.rank(),
        [](const auto &entry, uint32_t rank) { return entry.first < rank; });
    if (it == position.end() || it->first != r.rank() || outcomes[it->second])
      continue; // not ours (bounds-checked) or a duplicate
    RankOutcome outcome;
    outcome.rank = r.rank();
    outcome.payloads = payloads;
    if (r.outcome_case() == proto::RankResult::kError)
      outcome.status =
          Status(r.unreachable() ? ErrorCode::Supervision : ErrorCode::Remote,
                 r.error());
    else
      outcome.value = std::move(*r.mutable_value());
    if (!perRank.empty())
      ready.emplace_back(it->second, outcome);
    outcomes[it->second] = std::move(outcome);
    --remaining;
  }
  if (remaining == 0)
    return finishLocked(lock);
  lock.unlock();
  for (auto &[pos, outcome] : ready)
    perRank[pos].set(std::move(outcome));
}

RankOutcome PendingCall::failedOutcome(size_t i, const Status &status) const {
  RankOutcome outcome;
  outcome.rank = rankList[i];
  outcome.status = status;
  outcome.payloads = std::make_shared<const PayloadList>();
  return outcome;
}

void PendingCall::fail(const Status &status) {
  std::unique_lock<std::mutex> lock(mu);
  if (remaining == 0)
    return;
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (!outcomes[i])
      outcomes[i] = failedOutcome(i, status);
  remaining = 0;
  finishLocked(lock);
}

void PendingCall::setRoutes(std::string mesh,
                            std::vector<uint32_t> procsOfTargets,
                            std::vector<int32_t> parentsOfTargets,
                            std::vector<uint32_t> targetOfRank) {
  std::lock_guard<std::mutex> guard(mu);
  meshName = std::move(mesh);
  targetProcs = std::move(procsOfTargets);
  parents = std::move(parentsOfTargets);
  targetOf = std::move(targetOfRank);
}

std::vector<size_t> PendingCall::routedThrough(uint32_t procRank) const {
  std::vector<size_t> out;
  if (targetOf.size() != rankList.size()) {
    for (size_t i = 0; i < rankList.size(); ++i)
      out.push_back(i);
    return out;
  }
  // A target is cut off if the failed proc is the target or an ancestor.
  std::vector<char> cut(targetProcs.size(), 0);
  for (size_t t = 0; t < targetProcs.size(); ++t)
    for (int64_t a = static_cast<int64_t>(t); a >= 0 && !cut[t];
         a = parents[static_cast<size_t>(a)])
      cut[t] = targetProcs[static_cast<size_t>(a)] == procRank;
  for (size_t i = 0; i < targetOf.size(); ++i)
    if (targetOf[i] < cut.size() && cut[targetOf[i]])
      out.push_back(i);
  return out;
}

void PendingCall::procFailed(uint32_t procRank, const Status &status) {
  std::vector<std::pair<size_t, RankOutcome>> failed;
  std::unique_lock<std::mutex> lock(mu);
  if (remaining == 0)
    return;
  for (size_t i : routedThrough(procRank)) {
    if (outcomes[i])
      continue;
    RankOutcome outcome = failedOutcome(i, status);
    failed.emplace_back(i, outcome);
    outcomes[i] = std::move(outcome);
    --remaining;
  }
  if (failed.empty())
    return;
  if (remaining == 0)
    return finishLocked(lock);
  // The port stays open for the healthy ranks' replies; the all-ranks
  // future fails now, naming the first unreachable rank.
  std::string prefix =
      meshName.empty()
          ? ""
          : meshName + "[" + std::to_string(failed.front().second.rank) + "]: ";
  lock.unlock();
  for (auto &[pos, outcome] : failed)
    if (!perRank.empty())
      perRank[pos].set(std::move(outcome));
  allDone.set(Status(status.code(), prefix + status.message()));
}

void PendingCall::finishLocked(std::unique_lock<std::mutex> &lock) {
  // Every outcome is set and none is read again (a late or duplicate reply
  // only checks that its slot is engaged, which a moved-from one still is),
  // so they move; the per-rank futures need copies.
  std::vector<RankOutcome> all;
  all.reserve(outcomes.size());
  for (auto &o : outcomes)
    all.push_back(perRank.empty() ? std::move(*o) : *o);
  uint64_t closing = port;
  port = 0;
  lock.unlock();
  if (closing)
    rt.router().closePort(closing);
  for (size_t i = 0; i < perRank.size(); ++i)
    perRank[i].set(all[i]); // no-op for ranks already completed
  allDone.set(std::move(all));
}

} // namespace monarch
