//===- Host.h - Spawning proc meshes on a host ------------------*- C++ -*-===//
//
//   auto procs = monarch::thisHost().spawnProcs({{"host", 2}, {"gpu", 2}});
//
// starts one worker process per rank, hands each its bootstrap (id, parent
// address, job secret) through a pipe, waits until all report ready and
// returns the mesh.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_HOST_H
#define MONARCH_RUNTIME_PROC_HOST_H

#include "monarch/runtime/proc/Liveness.h"
#include "monarch/runtime/proc/ProcLauncher.h"
#include "monarch/runtime/proc/ProcMesh.h"

namespace monarch {

class Runtime;

struct SpawnProcsOptions {
  /// Name of the proc mesh (in events and log prefixes); default "procsN".
  std::string name;
  /// "unix" (default) or "tcp" for the workers' listeners.
  std::string transport = "unix";
  /// Interface TCP listeners bind to; loopback unless told otherwise.
  std::string tcpHost = "127.0.0.1";
  /// Worker binary; default locateWorkerBinary().
  std::string workerPath;
  /// Its arguments and extra environment (ProcLaunchSpec).
  std::vector<std::string> workerArgs;
  std::vector<std::pair<std::string, std::string>> workerEnv;
  /// Shared libraries each worker dlopens (actor classes defined there).
  std::vector<std::string> actorLibraries;
  std::chrono::milliseconds readyTimeout{30000};
  /// Heartbeats and the silence after which a proc is unresponsive
  /// (proc/Liveness.h); interval 0 turns it off for this mesh.
  LivenessOptions liveness = LivenessOptions::fromEnvironment();
  /// How procs are started; default: fork/exec on this machine.
  std::shared_ptr<ProcLauncher> launcher;
};

class Host {
public:
  explicit Host(Runtime &rt) : rt(rt) {}
  Expected<ProcMesh> spawnProcs(const Shape &shape,
                                SpawnProcsOptions options = {}) const;

private:
  Runtime &rt;
};

/// This machine, driven by this process's runtime (Runtime::ofProcess():
/// the global runtime in the controller, the worker's own in a worker).
Host thisHost();

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_HOST_H
