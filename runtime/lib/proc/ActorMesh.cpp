#include "monarch/runtime/proc/ActorMesh.h"

#include "monarch/runtime/proc/CastTree.h"
#include "monarch/runtime/proc/MeshState.h"
#include "monarch/runtime/proc/Runtime.h"

#include <algorithm>

namespace monarch {

Status meshErrorToStatus(const mesh::MeshError &error) {
  return Status(error.kind == mesh::ErrorKind::Index ? ErrorCode::NotFound
                                                     : ErrorCode::Invalid,
                std::string(mesh::errorKindName(error.kind)) + ": " +
                    error.message);
}

ActorMesh::ActorMesh(std::shared_ptr<ActorMeshState> state, mesh::MeshView view)
    : state(std::move(state)), meshView(std::move(view)) {}

const std::string &ActorMesh::name() const { return state->name; }

Expected<ActorMesh> ActorMesh::slice(const std::string &dim,
                                     int64_t index) const {
  auto sliced = meshView.slice(dim, index);
  if (!sliced.ok())
    return meshErrorToStatus(sliced.error());
  return ActorMesh(state, std::move(sliced).value());
}

Expected<ActorMesh> ActorMesh::slice(const std::string &dim,
                                     const mesh::Range &range) const {
  auto sliced = meshView.slice(dim, range);
  if (!sliced.ok())
    return meshErrorToStatus(sliced.error());
  return ActorMesh(state, std::move(sliced).value());
}

void ActorMesh::supervise(SupervisionHook hook) const {
  state->setHook(std::move(hook));
}

Expected<int64_t> ActorMesh::chooseRank() const {
  auto live = state->liveRanks(meshView.ranks());
  if (live.empty())
    return Status(ErrorCode::Supervision,
                  "choose: every rank of mesh '" + name() + "' has failed");
  return live[state->chooseCounter.fetch_add(1) % live.size()];
}

namespace {
/// The links to the first hops of a cast (in the order splitCastTree gives
/// them), once each has room for more (bounded wait: backpressure).
Expected<std::vector<std::shared_ptr<transport::Link>>>
firstHopLinks(Runtime &rt, const std::vector<proto::CastTarget> &targets,
              const std::vector<int32_t> &parents) {
  std::vector<std::shared_ptr<transport::Link>> links;
  for (size_t t = 0; t < targets.size(); ++t) {
    if (!parents.empty() && parents[t] >= 0)
      continue; // reached through another proc
    auto link = rt.link(targets[t].addr());
    if (!link.ok())
      return link.status();
    if (Status room = (*link)->waitForRoom(rt.sendTimeout()); !room.isOk())
      return room;
    links.push_back(std::move(*link));
  }
  return links;
}
} // namespace

Status ActorMesh::broadcastLiveRaw(const std::string &endpoint,
                                   proto::Value args,
                                   PayloadList payloads) const {
  // A proc may fail between choosing the ranks and sending: then choose
  // again (each failure removes a rank, so this ends).
  for (;;) {
    std::vector<uint32_t> liveProcs = state->procs->liveProcs();
    std::vector<int64_t> ranks;
    for (int64_t r : state->liveRanks(meshView.ranks())) {
      uint32_t proc = state->procRanks.at(static_cast<uint32_t>(r) /
                                          state->perProc);
      if (std::binary_search(liveProcs.begin(), liveProcs.end(), proc))
        ranks.push_back(r);
    }
    if (ranks.empty())
      return state->procs->checkProcs({}); // ok, or "stopped"
    auto sent = castRaw(ranks, endpoint, args, payloads, Mode::None,
                        /*toUnresponsive=*/true);
    if (sent.ok())
      return Status::ok();
    if (sent.status().code() != ErrorCode::Supervision)
      return sent.status();
  }
}

Expected<std::shared_ptr<PendingCall>>
ActorMesh::castRaw(const std::vector<int64_t> &ranks,
                   const std::string &endpoint, proto::Value args,
                   PayloadList payloads, Mode mode,
                   bool toUnresponsive) const {
  ActorMeshState &st = *state;
  Runtime &rt = st.procs->rt;
  const uint32_t fanout = rt.fanout();
  Status usable = st.checkRanks(ranks);
  if (!usable.isOk())
    return usable;

  // One target per proc, in order of first appearance.
  // (The common single-rank send skips the per-proc lookup table.)
  std::vector<proto::CastTarget> targets;
  std::vector<uint32_t> involved;
  std::vector<int32_t> targetOf;
  if (ranks.size() > 1)
    targetOf.assign(st.procRanks.size(), -1);
  std::vector<uint32_t> actorRanks;
  actorRanks.reserve(ranks.size());
  std::vector<uint32_t> targetOfRank; // filled only for casts to several procs
  if (ranks.size() > 1)
    targetOfRank.reserve(ranks.size());
  for (int64_t r : ranks) {
    uint32_t rank = static_cast<uint32_t>(r);
    uint32_t index = rank / st.perProc;
    actorRanks.push_back(rank);
    size_t at = targets.size();
    if (!targetOf.empty() && targetOf[index] >= 0) {
      at = static_cast<size_t>(targetOf[index]);
    } else {
      if (!targetOf.empty())
        targetOf[index] = static_cast<int32_t>(at);
      proto::CastTarget t;
      uint32_t procRank = st.procRanks.at(index);
      t.set_addr(st.procs->addrOf(procRank));
      t.set_proc_index(index);
      targets.push_back(std::move(t));
      involved.push_back(procRank);
    }
    targets[at].add_locals(rank % st.perProc);
    if (ranks.size() > 1)
      targetOfRank.push_back(static_cast<uint32_t>(at));
  }

  std::vector<int32_t> parents;
  if (targets.size() > 1)
    parents = castTreeParents(targets.size(), fanout);

  std::shared_ptr<PendingCall> call;
  proto::PortRef replyTo;
  if (mode != Mode::None) {
    call = std::make_shared<PendingCall>(rt, std::move(actorRanks), involved,
                                         mode == Mode::Direct);
    replyTo = call->open();
    // Through a tree, a failed proc cuts off only the ranks below it.
    if (targets.size() > 1)
      call->setRoutes(st.name, involved, parents, std::move(targetOfRank));
    Status tracked = st.procs->track(call, involved);
    if (!tracked.isOk()) {
      call->fail(tracked);
      return tracked;
    }
  } else {
    Status alive = st.procs->checkProcs(involved, toUnresponsive);
    if (!alive.isOk())
      return alive;
  }

  // Backpressure: wait (bounded) for room on the links this send uses
  // before numbering it, so a timeout fails the send without a gap.
  auto links = firstHopLinks(rt, targets, parents);
  if (!links.ok()) {
    if (call)
      call->fail(links.status());
    return links.status();
  }

  proto::ReplyMode replyMode = mode == Mode::None     ? proto::REPLY_NONE
                               : mode == Mode::Merged ? proto::REPLY_MERGED
                                                      : proto::REPLY_DIRECT;
  std::lock_guard<std::mutex> guard(rt.sendMutex());
  for (auto &t : targets)
    t.set_seq(rt.nextSeq(t.addr()));
  auto children = splitCastTree(std::move(targets), fanout);
  if (children.size() != links->size()) {
    Status bad(ErrorCode::Internal, "cast tree and first-hop links disagree");
    if (call)
      call->fail(bad);
    return bad;
  }
  std::vector<transport::Message> messages;
  messages.reserve(children.size());
  for (size_t i = 0; i < children.size(); ++i) {
    auto &child = children[i];
    bool last = i + 1 == children.size();
    transport::Message m;
    m.envelope.set_sender(rt.senderId());
    m.envelope.set_seq(child.head.seq());
    auto *c = m.envelope.mutable_cast();
    c->set_mesh(st.name);
    c->set_endpoint(endpoint);
    if (last)
      *c->mutable_args() = std::move(args);
    else
      *c->mutable_args() = args;
    c->set_reply_mode(replyMode);
    if (call)
      *c->mutable_reply_to() = replyTo;
    c->set_fanout(fanout);
    *c->mutable_here() = std::move(child.head);
    for (auto &t : child.rest)
      *c->add_subtree() = std::move(t);
    if (last)
      m.payloads = std::move(payloads);
    else
      m.payloads = payloads;
    m.awaited = call != nullptr;
    messages.push_back(std::move(m));
  }
  // A message the link cannot encode would be dropped: fail the call with
  // the reason instead. Sequence numbers are taken already, so the procs are
  // told to skip them (nothing of this cast was sent).
  for (const auto &m : messages) {
    Status fits =
        transport::checkEncodable(m, rt.transport().options().limits);
    if (fits.isOk())
      continue;
    Status refused(fits.code(), "cannot send '" + endpoint + "' to mesh '" +
                                    st.name + "': " + fits.message());
    std::vector<std::string> numbered;
    for (const auto &child : messages) {
      numbered.push_back(child.envelope.cast().here().addr());
      for (const auto &t : child.envelope.cast().subtree())
        numbered.push_back(t.addr());
    }
    for (const auto &addr : numbered) {
      transport::Message resync;
      resync.envelope.set_sender(rt.senderId());
      resync.envelope.mutable_resync()->set_next_seq(rt.peekSeq(addr));
      if (auto link = rt.link(addr); link.ok())
        (*link)->send(std::move(resync));
    }
    if (call)
      call->fail(refused);
    return refused;
  }
  for (size_t i = 0; i < messages.size(); ++i)
    (*links)[i]->send(std::move(messages[i]));
  return call;
}

} // namespace monarch
