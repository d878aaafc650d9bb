//===- AttachedProcs.cpp - Meshes that another process spawned ------------===//

#include "monarch/runtime/proc/AttachedProcs.h"

#include "monarch/runtime/proc/MeshState.h"
#include "monarch/runtime/proc/Runtime.h"

namespace monarch {

Expected<std::shared_ptr<ProcMeshState>>
attachProcMesh(Runtime &rt, const std::string &name,
               const mesh::MeshView &root,
               const std::vector<std::string> &addrs, SupervisionHook hook) {
  if (static_cast<size_t>(root.size()) != addrs.size())
    return Status(ErrorCode::Invalid,
                  "attaching procs '" + name + "': " +
                      std::to_string(addrs.size()) +
                      " addresses for a mesh of " + std::to_string(root.size()));
  auto state = std::make_shared<ProcMeshState>(rt, name, root);
  state->attached = true; // another process owns these procs
  {
    std::lock_guard<std::mutex> guard(state->mu);
    state->slots.resize(addrs.size());
    for (size_t r = 0; r < addrs.size(); ++r) {
      auto &slot = state->slots[r];
      slot.addr = addrs[r];
      slot.ready = !addrs[r].empty();
      slot.alive = !addrs[r].empty();
      if (addrs[r].empty())
        slot.failure = "not reachable from this process";
    }
  }
  if (hook)
    state->setHook(std::move(hook));
  std::weak_ptr<ProcMeshState> weak = state;
  for (size_t r = 0; r < addrs.size(); ++r) {
    if (addrs[r].empty())
      continue;
    uint32_t rank = static_cast<uint32_t>(r);
    auto link = rt.link(addrs[r]);
    if (!link.ok()) {
      state->procFailed(rank, "unreachable (" + link.status().message() + ")");
      continue;
    }
    (*link)->onClose([weak, rank](const Status &why) {
      if (auto st = weak.lock())
        st->procFailed(rank, "connection lost (" + why.message() + ")");
    });
  }
  return state;
}

Expected<ActorMesh> attachActorMesh(const std::shared_ptr<ProcMeshState> &procs,
                                    const std::string &name,
                                    const std::vector<uint32_t> &procRanks,
                                    const mesh::MeshView &root) {
  if (static_cast<size_t>(root.size()) != procRanks.size())
    return Status(ErrorCode::Invalid,
                  "attaching actor mesh '" + name + "': " +
                      std::to_string(procRanks.size()) +
                      " proc ranks for an actor mesh of " +
                      std::to_string(root.size()));
  size_t procCount = 0;
  {
    std::lock_guard<std::mutex> guard(procs->mu);
    procCount = procs->slots.size();
  }
  for (uint32_t r : procRanks)
    if (r >= procCount)
      return Status(ErrorCode::Invalid, "attaching actor mesh '" + name +
                                            "': no proc rank " +
                                            std::to_string(r));
  auto state =
      std::make_shared<ActorMeshState>(procs, name, procRanks, 1u, root);
  procs->addActorMesh(state);
  return ActorMesh(state, root);
}

} // namespace monarch
