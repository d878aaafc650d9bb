//===- MeshState.h - Shared state behind mesh handles -----------*- C++ -*-===//
//
// ProcMesh and ActorMesh are cheap handles (a view plus a shared state); every
// slice of a mesh shares its state, so a failure recorded once is seen by all
// of them. Internal to the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_MESHSTATE_H
#define MONARCH_RUNTIME_PROC_MESHSTATE_H

#include "monarch/mesh/MeshView.h"
#include "monarch/runtime/proc/Liveness.h"
#include "monarch/runtime/proc/PendingCall.h"
#include "monarch/runtime/proc/ProcLauncher.h"
#include "monarch/runtime/supervision/Supervision.h"
#include "monarch/runtime/transport/Transport.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace monarch {

class Runtime;
class ActorMeshState;

class ProcMeshState : public std::enable_shared_from_this<ProcMeshState> {
public:
  struct Slot {
    std::string addr;
    std::unique_ptr<LaunchedProc> process;
    std::shared_ptr<transport::Link> link;
    bool ready = false;
    bool alive = true;
    std::string failure;
    /// No heartbeat for a while (Liveness.h): calls to it fail meanwhile.
    bool unresponsive = false;
    int64_t silentMs = 0;
  };

  ProcMeshState(Runtime &rt, std::string name, mesh::MeshView root);
  ~ProcMeshState();

  /// A proc died or became unreachable: fail its calls, mark its actors,
  /// resynchronize ordering with the others, raise the supervision event.
  void procFailed(uint32_t rank, const std::string &reason);
  /// A proc went silent (no heartbeat for `silentMs`): fail its calls and
  /// raise an Unresponsive event; it may come back (procResponsive).
  void procUnresponsive(uint32_t rank, int64_t silentMs);
  /// It was heard from again: raise a Responsive event.
  void procResponsive(uint32_t rank, int64_t silentMs);
  /// Not ok if any of `procRanks` has failed or the mesh is stopped, or --
  /// unless `allowUnresponsive` -- is unresponsive.
  Status checkProcs(const std::vector<uint32_t> &procRanks,
                    bool allowUnresponsive = false);
  /// Ranks that have not failed (unresponsive ones included).
  std::vector<uint32_t> liveProcs();
  /// Registers an in-flight call (after checking its procs, atomically).
  Status track(const std::shared_ptr<PendingCall> &call,
               const std::vector<uint32_t> &procRanks);
  void addActorMesh(const std::shared_ptr<ActorMeshState> &mesh);
  std::string addrOf(uint32_t rank);
  Status stop();
  void raise(const SupervisionEvent &event);
  void setHook(SupervisionHook hook);
  std::vector<int> pids();

  Runtime &rt;
  const std::string name;
  const mesh::MeshView root;
  std::vector<Slot> slots; // guarded by mu after spawnProcs returns
  std::mutex mu;
  /// Set by spawnProcs; the heartbeat port stays open for the mesh's life.
  std::shared_ptr<LivenessMonitor> liveness;
  /// A handle to procs another process spawned and owns (a mesh passed to
  /// an actor): their end -- their owner stopping them, usually -- is the
  /// owner's to report, so a lost connection here is logged at debug
  /// level; the handle's calls still fail with a supervision error.
  bool attached = false;
  uint64_t heartbeatPort = 0;

private:
  std::string failureMessage(uint32_t rank, const std::string &reason) const;
  /// checkProcs with `mu` held.
  Status checkProcsLocked(const std::vector<uint32_t> &procRanks,
                          bool allowUnresponsive = false) const;
  /// Fails the in-flight calls that involve `rank` with `status`.
  void failCallsOf(uint32_t rank, const Status &status);

  bool stopping = false;
  bool stopped = false;
  SupervisionHook hook;
  std::vector<std::weak_ptr<PendingCall>> pending;
  size_t pruneAt = 64;
  std::vector<std::weak_ptr<ActorMeshState>> actorMeshes;
};

class ActorMeshState : public std::enable_shared_from_this<ActorMeshState> {
public:
  ActorMeshState(std::shared_ptr<ProcMeshState> procs, std::string name,
                 std::vector<uint32_t> procRanks, uint32_t perProc,
                 mesh::MeshView root);
  ~ActorMeshState();

  /// Opens the port on which procs report stopped actors.
  proto::PortRef openSupervisionPort();
  void actorFailed(uint32_t rank, const std::string &reason, bool raiseEvent);
  void procFailed(uint32_t procRank, const std::string &reason);
  /// Supervision error for the first failed rank among `ranks`, or ok.
  Status checkRanks(const std::vector<int64_t> &ranks);
  void setHook(SupervisionHook hook);
  std::vector<int64_t> liveRanks(const std::vector<int64_t> &ranks);

  const std::shared_ptr<ProcMeshState> procs;
  const std::string name;
  const std::vector<uint32_t> procRanks; ///< proc rank of each proc index
  const uint32_t perProc;
  const mesh::MeshView root;
  std::atomic<uint64_t> chooseCounter{0};

private:
  std::mutex mu;
  std::unordered_map<uint32_t, std::string> failed;
  SupervisionHook hook;
  uint64_t supervisionPort = 0;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_MESHSTATE_H
