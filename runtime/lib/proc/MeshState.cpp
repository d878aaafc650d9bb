#include "monarch/runtime/proc/MeshState.h"

#include "monarch/runtime/proc/ReplyMerger.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <algorithm>
#include <csignal>

namespace monarch {

//===----------------------------------------------------------------------===//
// ProcMeshState
//===----------------------------------------------------------------------===//

ProcMeshState::ProcMeshState(Runtime &rt, std::string name, mesh::MeshView root)
    : rt(rt), name(std::move(name)), root(std::move(root)) {}

ProcMeshState::~ProcMeshState() {
  Status s = stop();
  if (!s.isOk())
    log::warning("stopping proc mesh '", name, "': ", s.toString());
  if (heartbeatPort)
    rt.router().closePort(heartbeatPort);
}

std::string ProcMeshState::failureMessage(uint32_t rank,
                                          const std::string &reason) const {
  return "proc mesh '" + name + "' rank " + std::to_string(rank) +
         " failed: " + reason;
}

std::string ProcMeshState::addrOf(uint32_t rank) {
  std::lock_guard<std::mutex> guard(mu);
  return rank < slots.size() ? slots[rank].addr : std::string();
}

std::vector<int> ProcMeshState::pids() {
  std::lock_guard<std::mutex> guard(mu);
  std::vector<int> out;
  for (auto &s : slots)
    out.push_back(s.process ? s.process->pid() : -1);
  return out;
}

void ProcMeshState::setHook(SupervisionHook h) {
  std::lock_guard<std::mutex> guard(mu);
  hook = std::move(h);
}

void ProcMeshState::raise(const SupervisionEvent &event) {
  SupervisionHook h;
  {
    std::lock_guard<std::mutex> guard(mu);
    h = hook;
  }
  if (h && h(event))
    return;
  raiseToRoot(event);
}

Status ProcMeshState::checkProcs(const std::vector<uint32_t> &procRanks,
                                 bool allowUnresponsive) {
  std::lock_guard<std::mutex> guard(mu);
  return checkProcsLocked(procRanks, allowUnresponsive);
}

std::vector<uint32_t> ProcMeshState::liveProcs() {
  std::lock_guard<std::mutex> guard(mu);
  std::vector<uint32_t> out;
  if (stopping)
    return out;
  for (uint32_t r = 0; r < slots.size(); ++r)
    if (slots[r].alive)
      out.push_back(r);
  return out;
}

namespace {
std::string silence(int64_t ms) {
  return "no heartbeat for " + std::to_string(ms) + " ms";
}
} // namespace

Status ProcMeshState::checkProcsLocked(const std::vector<uint32_t> &procRanks,
                                       bool allowUnresponsive) const {
  if (stopping)
    return Status(ErrorCode::Closed, "proc mesh '" + name + "' is stopped");
  for (uint32_t r : procRanks) {
    if (r >= slots.size() || !slots[r].alive)
      return Status(ErrorCode::Supervision,
                    failureMessage(r, r < slots.size() ? slots[r].failure
                                                       : "no such rank"));
    if (slots[r].unresponsive && !allowUnresponsive)
      return Status(ErrorCode::Supervision,
                    "proc mesh '" + name + "' rank " + std::to_string(r) +
                        " is unresponsive: " + silence(slots[r].silentMs));
  }
  return Status::ok();
}

void ProcMeshState::failCallsOf(uint32_t rank, const Status &status) {
  std::vector<std::shared_ptr<PendingCall>> calls;
  {
    std::lock_guard<std::mutex> guard(mu);
    for (auto &w : pending)
      if (auto c = w.lock())
        calls.push_back(std::move(c));
  }
  for (auto &c : calls)
    if (c->involvesProc(rank))
      c->procFailed(rank, status);
}

void ProcMeshState::procUnresponsive(uint32_t rank, int64_t silentMs) {
  {
    std::lock_guard<std::mutex> guard(mu);
    if (rank >= slots.size() || !slots[rank].alive || stopping ||
        slots[rank].unresponsive)
      return;
    slots[rank].unresponsive = true;
    slots[rank].silentMs = silentMs;
  }
  std::string reason = silence(silentMs);
  log::error("proc mesh '", name, "' rank ", rank, " is unresponsive: ", reason);
  // Its calls fail now; what was sent to it stays queued on its open
  // connection, so nothing is resynchronized: it may come back.
  failCallsOf(rank, Status(ErrorCode::Supervision,
                           "proc mesh '" + name + "' rank " +
                               std::to_string(rank) +
                               " is unresponsive: " + reason));
  SupervisionEvent event{name, static_cast<int64_t>(rank), reason};
  event.kind = SupervisionKind::Unresponsive;
  event.silentMs = silentMs;
  raise(event);
}

void ProcMeshState::procResponsive(uint32_t rank, int64_t silentMs) {
  {
    std::lock_guard<std::mutex> guard(mu);
    if (rank >= slots.size() || !slots[rank].alive || stopping ||
        !slots[rank].unresponsive)
      return;
    slots[rank].unresponsive = false;
  }
  std::string reason = "heard from after " + std::to_string(silentMs) +
                       " ms without a heartbeat";
  log::warning("proc mesh '", name, "' rank ", rank, " is responsive again (",
               reason, ")");
  SupervisionEvent event{name, static_cast<int64_t>(rank), reason};
  event.kind = SupervisionKind::Responsive;
  event.silentMs = silentMs;
  raise(event);
}

Status ProcMeshState::track(const std::shared_ptr<PendingCall> &call,
                            const std::vector<uint32_t> &procRanks) {
  std::lock_guard<std::mutex> guard(mu);
  if (Status status = checkProcsLocked(procRanks); !status)
    return status;
  if (pending.size() >= pruneAt) {
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const auto &w) { return w.expired(); }),
                  pending.end());
    pruneAt = std::max<size_t>(64, pending.size() * 2);
  }
  pending.push_back(call);
  return Status::ok();
}

void ProcMeshState::addActorMesh(const std::shared_ptr<ActorMeshState> &mesh) {
  std::lock_guard<std::mutex> guard(mu);
  actorMeshes.push_back(mesh);
}

void ProcMeshState::procFailed(uint32_t rank, const std::string &reason) {
  std::vector<std::shared_ptr<PendingCall>> calls;
  std::vector<std::shared_ptr<ActorMeshState>> meshes;
  std::vector<std::string> survivors;
  bool report;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (rank >= slots.size() || !slots[rank].alive)
      return;
    auto &slot = slots[rank];
    slot.alive = false;
    slot.failure = reason;
    report = !stopping;
    if (liveness)
      liveness->forget(rank);
    if (slot.process)
      slot.process->kill(SIGKILL); // unreachable but running: end it
    for (auto &w : pending)
      if (auto c = w.lock())
        calls.push_back(std::move(c));
    for (auto &w : actorMeshes)
      if (auto m = w.lock())
        meshes.push_back(std::move(m));
    for (auto &s : slots)
      if (s.alive && s.ready)
        survivors.push_back(s.addr);
  }
  if (!report)
    return;
  std::string message = failureMessage(rank, reason);
  if (attached)
    log::debug(message);
  else
    log::error(message);
  for (auto &m : meshes)
    m->procFailed(rank, message);
  for (auto &c : calls)
    if (c->involvesProc(rank))
      c->procFailed(rank, Status(ErrorCode::Supervision, message));
  // Casts that went through the dead proc left gaps in the survivors'
  // sequence numbers; tell them not to wait for those.
  {
    std::lock_guard<std::mutex> guard(rt.sendMutex());
    for (auto &addr : survivors) {
      transport::Message resync;
      resync.envelope.set_sender(rt.senderId());
      resync.envelope.mutable_resync()->set_next_seq(rt.peekSeq(addr));
      if (auto link = rt.link(addr); link.ok())
        (*link)->send(std::move(resync));
    }
  }
  raise(SupervisionEvent{name, static_cast<int64_t>(rank), reason});
}

Status ProcMeshState::stop() {
  std::vector<std::pair<std::string, LaunchedProc *>> running;
  std::vector<std::shared_ptr<PendingCall>> calls;
  std::vector<std::shared_ptr<ActorMeshState>> meshes;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (stopped)
      return Status::ok();
    stopping = true;
    if (liveness)
      liveness->stop();
    for (auto &s : slots)
      if (s.process && !s.process->hasExited())
        running.emplace_back(s.alive && s.ready ? s.addr : "", s.process.get());
    for (auto &w : pending)
      if (auto c = w.lock())
        calls.push_back(std::move(c));
    pending.clear();
    for (auto &w : actorMeshes)
      if (auto m = w.lock())
        meshes.push_back(std::move(m));
  }
  {
    std::lock_guard<std::mutex> guard(rt.sendMutex());
    for (auto &[addr, proc] : running) {
      if (addr.empty())
        continue;
      transport::Message stopMsg;
      stopMsg.envelope.set_sender(rt.senderId());
      stopMsg.envelope.set_seq(rt.nextSeq(addr));
      stopMsg.envelope.mutable_stop();
      if (auto link = rt.link(addr); link.ok())
        (*link)->send(std::move(stopMsg));
    }
  }
  Status result;
  // Nothing may block the io thread (it reaps the children): there, stopping
  // means SIGKILL without waiting.
  bool mayWait = !Runtime::onIoThread();
  for (auto &[addr, proc] : running) {
    if (!mayWait) {
      proc->kill(SIGKILL);
      continue;
    }
    if (proc->waitExited(std::chrono::seconds(5)))
      continue;
    proc->kill(SIGKILL);
    if (!proc->waitExited(std::chrono::seconds(5)))
      result = Status(ErrorCode::Timeout,
                      "a proc of '" + name + "' did not exit after SIGKILL");
  }
  Status stoppedStatus(ErrorCode::Closed, "proc mesh '" + name + "' stopped");
  for (auto &c : calls)
    c->fail(stoppedStatus);
  for (auto &m : meshes)
    for (uint32_t r = 0; r < slots.size(); ++r)
      m->procFailed(r, stoppedStatus.message());
  {
    std::lock_guard<std::mutex> guard(mu);
    for (auto &s : slots) {
      s.alive = false;
      if (s.failure.empty())
        s.failure = "stopped";
      if (s.link)
        s.link->close();
      s.link.reset();
    }
    stopped = true;
  }
  return result;
}

//===----------------------------------------------------------------------===//
// ActorMeshState
//===----------------------------------------------------------------------===//

ActorMeshState::ActorMeshState(std::shared_ptr<ProcMeshState> procs,
                               std::string name,
                               std::vector<uint32_t> procRanks,
                               uint32_t perProc, mesh::MeshView root)
    : procs(std::move(procs)), name(std::move(name)),
      procRanks(std::move(procRanks)), perProc(perProc), root(std::move(root)) {
}

ActorMeshState::~ActorMeshState() {
  if (supervisionPort)
    procs->rt.router().closePort(supervisionPort);
}

proto::PortRef ActorMeshState::openSupervisionPort() {
  std::weak_ptr<ActorMeshState> weak = shared_from_this();
  supervisionPort =
      procs->rt.router().openPort([weak](transport::Message &&message) {
        auto self = weak.lock();
        if (!self || !message.envelope.has_supervision())
          return;
        const auto &ev = message.envelope.supervision();
        self->actorFailed(ev.rank(), ev.reason(), true);
      });
  proto::PortRef ref;
  ref.set_addr(procs->rt.addr());
  ref.set_port(supervisionPort);
  return ref;
}

void ActorMeshState::setHook(SupervisionHook h) {
  std::lock_guard<std::mutex> guard(mu);
  hook = std::move(h);
}

void ActorMeshState::actorFailed(uint32_t rank, const std::string &reason,
                                 bool raiseEvent) {
  SupervisionHook h;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (rank >= root.size() || failed.count(rank))
      return;
    failed[rank] = reason;
    h = hook;
  }
  if (!raiseEvent)
    return;
  SupervisionEvent event{name, rank, reason};
  if (h && h(event))
    return;
  procs->raise(event);
}

void ActorMeshState::procFailed(uint32_t procRank, const std::string &reason) {
  for (uint32_t index = 0; index < procRanks.size(); ++index)
    if (procRanks[index] == procRank)
      for (uint32_t local = 0; local < perProc; ++local)
        actorFailed(index * perProc + local, reason, false);
}

Status ActorMeshState::checkRanks(const std::vector<int64_t> &ranks) {
  std::lock_guard<std::mutex> guard(mu);
  if (failed.empty())
    return Status::ok();
  for (int64_t r : ranks) {
    auto it = failed.find(static_cast<uint32_t>(r));
    if (it != failed.end())
      return Status(ErrorCode::Supervision, "actor mesh '" + name + "' rank " +
                                                std::to_string(r) +
                                                " failed: " + it->second);
  }
  return Status::ok();
}

std::vector<int64_t>
ActorMeshState::liveRanks(const std::vector<int64_t> &ranks) {
  std::lock_guard<std::mutex> guard(mu);
  std::vector<int64_t> out;
  for (int64_t r : ranks)
    if (!failed.count(static_cast<uint32_t>(r)))
      out.push_back(r);
  return out;
}

} // namespace monarch
