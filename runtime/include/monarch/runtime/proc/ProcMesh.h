//===- ProcMesh.h - A shaped set of worker processes ------------*- C++ -*-===//
//
// Returned by Host::spawnProcs. Spawning an actor mesh creates one actor per
// proc of the view (or a per-proc shape of them); its constructor runs on each
// proc before spawn returns. stop() ends every proc of the root mesh; it is
// also called when the last handle goes away.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_PROCMESH_H
#define MONARCH_RUNTIME_PROC_PROCMESH_H

#include "monarch/runtime/proc/ActorMesh.h"

#include <chrono>
#include <utility>
#include <vector>

namespace monarch {

class ProcMeshState;
using Shape = std::vector<std::pair<std::string, int64_t>>;

class ProcMesh {
public:
  ProcMesh(std::shared_ptr<ProcMeshState> state, mesh::MeshView view);

  const mesh::MeshView &view() const { return meshView; }
  const std::string &name() const;
  size_t size() const { return static_cast<size_t>(meshView.size()); }

  /// `procs.spawn("trainers", "Trainer", args...)`: one actor per proc.
  template <typename... A>
  Expected<ActorMesh> spawn(const std::string &name,
                            const std::string &actorClass,
                            const A &...args) const {
    return spawnPerProc(name, actorClass, Shape{}, args...);
  }
  /// `perProc` actors on each proc, as extra inner dims of the actor mesh.
  template <typename... A>
  Expected<ActorMesh>
  spawnPerProc(const std::string &name, const std::string &actorClass,
               const Shape &perProc, const A &...args) const {
    PayloadList payloads;
    proto::Value encoded = encodeArgs(payloads, args...);
    return spawnRaw(name, actorClass, perProc, std::move(encoded),
                    std::move(payloads));
  }

  Expected<ProcMesh> slice(const std::string &dim, int64_t index) const;
  Expected<ProcMesh> slice(const std::string &dim,
                           const mesh::Range &range) const;

  /// Ends all procs of the root mesh (graceful, then SIGKILL after a bound).
  Status stop() const;
  /// Handles supervision events of this proc mesh and its actor meshes.
  void supervise(SupervisionHook hook) const;
  /// OS process ids by rank of the root mesh (tests, diagnostics).
  std::vector<int> pids() const;

  Expected<ActorMesh> spawnRaw(const std::string &name,
                               const std::string &actorClass,
                               const Shape &perProc, proto::Value args,
                               PayloadList payloads) const;

private:
  std::shared_ptr<ProcMeshState> state;
  mesh::MeshView meshView;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_PROCMESH_H
