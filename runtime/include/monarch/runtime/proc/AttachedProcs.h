//===- AttachedProcs.h - Meshes that another process spawned ----*- C++ -*-===//
//
// A proc mesh or actor mesh passed by reference reaches this process as the
// procs' listen addresses (and, for actors, the runtime's name of the actor
// mesh and the procs it was spawned on). Attaching makes ordinary handles of
// them:
//
//   auto procs = attachProcMesh(rt, "procs1", root, addrs, hook);
//   ActorMesh actors = attachActorMesh(procs, "trainer", {0, 1}, actorRoot);
//   actors.slice("ranks", 1)->callOne<Frames>("call", ...);
//
// Calls, casts and slices go straight to the procs, as from the spawner's
// handle; stopping an attached mesh only retires the handle (the spawner owns
// the processes); a lost connection fails that rank here (the hook hears of
// it). Used by monarch._actors (meshes as values) and by native tensor
// workers reaching their rank's actor (the rref adverb).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_ATTACHEDPROCS_H
#define MONARCH_RUNTIME_PROC_ATTACHEDPROCS_H

#include "monarch/mesh/MeshView.h"
#include "monarch/runtime/proc/ActorMesh.h"
#include "monarch/runtime/supervision/Supervision.h"

#include <memory>
#include <string>
#include <vector>

namespace monarch {

class ProcMeshState;
class Runtime;

/// The procs at `addrs` (one per rank of `root`, row-major). An empty
/// address is a rank this process cannot reach: it starts failed. Links are
/// opened here (blocking, bounded by the transport's connect timeout).
Expected<std::shared_ptr<ProcMeshState>>
attachProcMesh(Runtime &rt, const std::string &name,
               const mesh::MeshView &root,
               const std::vector<std::string> &addrs, SupervisionHook hook);

/// The actor mesh `name` that another process spawned on the procs
/// `procRanks` of `procs` (one actor each, the actor mesh shaped `root`).
/// Its failures stay the owner's to handle: here they are errors of calls.
Expected<ActorMesh> attachActorMesh(const std::shared_ptr<ProcMeshState> &procs,
                                    const std::string &name,
                                    const std::vector<uint32_t> &procRanks,
                                    const mesh::MeshView &root);

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_ATTACHEDPROCS_H
