//===- ProcServer.h - The service of a worker proc --------------*- C++ -*-===//
//
// Handles the ordered messages addressed to a proc: SpawnActors creates the
// local actors of an actor mesh, Cast forwards down the casting tree and
// delivers to local actors, StopProc ends the worker. A fire-and-forget
// handler that fails stops its actor and is reported to the mesh's owner.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_PROCSERVER_H
#define MONARCH_RUNTIME_PROC_PROCSERVER_H

#include "monarch/runtime/actor/ActorCell.h"
#include "monarch/runtime/transport/Message.h"

#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace monarch {

class Runtime;
class LinkWatch;

/// The ProcReady message a started proc sends to the parent named in its
/// bootstrap, carrying its rank, address and pid.
transport::Message procReadyMessage(const proto::Bootstrap &boot, Runtime &rt);

class ProcServer {
public:
  ProcServer(Runtime &rt, std::string procId, uint32_t procRank);

  /// The Router's service handler.
  void handle(transport::Message &&message);

  /// Blocks until StopProc arrives or `timeout` passes; true if stopping.
  bool waitForStop(std::chrono::milliseconds timeout);
  void requestStop();

private:
  struct LocalMesh {
    uint32_t procIndex = 0;
    std::vector<std::shared_ptr<ActorCell>> cells;
    proto::PortRef owner;
  };
  void spawn(transport::Message &&message);
  void cast(transport::Message &&message);

  Runtime &rt;
  std::string procId;
  uint32_t procRank;

  /// Tells merges waiting on a child proc that its link closed.
  std::shared_ptr<LinkWatch> childWatch;

  std::shared_mutex meshesMu;
  std::unordered_map<std::string, std::shared_ptr<LocalMesh>> meshes;

  std::mutex stopMu;
  std::condition_variable stopCv;
  bool stopping = false;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_PROCSERVER_H
