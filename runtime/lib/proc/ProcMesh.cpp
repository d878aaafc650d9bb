#include "monarch/runtime/proc/ProcMesh.h"

#include "monarch/runtime/proc/MeshState.h"
#include "monarch/runtime/proc/Runtime.h"

namespace monarch {

Status meshErrorToStatus(const mesh::MeshError &error);

ProcMesh::ProcMesh(std::shared_ptr<ProcMeshState> state, mesh::MeshView view)
    : state(std::move(state)), meshView(std::move(view)) {}

const std::string &ProcMesh::name() const { return state->name; }

Expected<ProcMesh> ProcMesh::slice(const std::string &dim,
                                   int64_t index) const {
  auto sliced = meshView.slice(dim, index);
  if (!sliced.ok())
    return meshErrorToStatus(sliced.error());
  return ProcMesh(state, std::move(sliced).value());
}

Expected<ProcMesh> ProcMesh::slice(const std::string &dim,
                                   const mesh::Range &range) const {
  auto sliced = meshView.slice(dim, range);
  if (!sliced.ok())
    return meshErrorToStatus(sliced.error());
  return ProcMesh(state, std::move(sliced).value());
}

Status ProcMesh::stop() const { return state->stop(); }

void ProcMesh::supervise(SupervisionHook hook) const {
  state->setHook(std::move(hook));
}

std::vector<int> ProcMesh::pids() const { return state->pids(); }

Expected<ActorMesh> ProcMesh::spawnRaw(const std::string &name,
                                       const std::string &actorClass,
                                       const Shape &perProc, proto::Value args,
                                       PayloadList payloads) const {
  Runtime &rt = state->rt;
  std::vector<uint32_t> procRanks;
  for (int64_t r : meshView.ranks())
    procRanks.push_back(static_cast<uint32_t>(r));
  Shape shape;
  for (const auto &d : meshView.dims())
    shape.emplace_back(d.name, d.size);
  int64_t count = 1;
  for (const auto &d : perProc) {
    shape.push_back(d);
    count *= d.second;
  }
  if (count < 1 || count > (1 << 20))
    return Status(ErrorCode::Invalid, "bad per-proc actor count");
  auto root = mesh::MeshView::root(shape);
  if (!root.ok())
    return meshErrorToStatus(root.error());
  auto actors = std::make_shared<ActorMeshState>(
      state, name, procRanks, static_cast<uint32_t>(count), *root);
  proto::PortRef owner = actors->openSupervisionPort();

  std::vector<uint32_t> ranks;
  for (int64_t r = 0; r < root->size(); ++r)
    ranks.push_back(static_cast<uint32_t>(r));
  auto call = std::make_shared<PendingCall>(rt, ranks, procRanks, false);
  proto::PortRef replyTo = call->open();
  Status tracked = state->track(call, procRanks);
  if (!tracked.isOk()) {
    call->fail(tracked);
    return tracked;
  }
  {
    std::lock_guard<std::mutex> guard(rt.sendMutex());
    for (uint32_t index = 0; index < procRanks.size(); ++index) {
      std::string addr = state->addrOf(procRanks[index]);
      transport::Message m;
      m.envelope.set_sender(rt.senderId());
      m.envelope.set_seq(rt.nextSeq(addr));
      auto *s = m.envelope.mutable_spawn();
      s->set_mesh(name);
      s->set_actor_class(actorClass);
      *s->mutable_args() = args;
      s->set_proc_index(index);
      s->set_count(static_cast<uint32_t>(count));
      *s->mutable_reply_to() = replyTo;
      *s->mutable_owner() = owner;
      m.payloads = payloads;
      auto link = rt.link(addr);
      if (!link.ok()) {
        call->fail(link.status());
        break;
      }
      (*link)->send(std::move(m));
    }
  }
  auto outcomes = call->all().get(std::chrono::seconds(60));
  if (!outcomes.ok())
    return Status(outcomes.status().code(),
                  "spawning '" + name + "': " + outcomes.status().message());
  for (const auto &o : *outcomes)
    if (!o.status.isOk())
      return Status(o.status.code(), "spawning '" + name + "' rank " +
                                         std::to_string(o.rank) + ": " +
                                         o.status.message());
  state->addActorMesh(actors);
  return ActorMesh(actors, *root);
}

} // namespace monarch
