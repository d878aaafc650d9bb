//===- HostMesh.h - Host agents on several machines as one mesh -*- C++ -*-===//
//
//   monarch::host::listenForHosts(addrs, secret);      // before the runtime
//   auto hosts = monarch::host::HostMesh::attach(addrs); // {"hosts": N}
//   auto procs = (*hosts)->spawnProcs({{"gpu", 2}});     // {"hosts": N, "gpu":
//   2}
//
// The controller attaches to running host agents (HostAgent.h), heartbeats
// them, and spawns proc meshes whose ranks are laid out host-major: rank r
// runs on host r / procsPerHost. Everything done with the resulting ProcMesh
// (actors, casts, supervision) is the same as for local procs. A host that
// is lost -- its agent died, its connection closed or it stopped answering
// heartbeats -- fails each of its procs with a reason naming the host.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_HOST_HOSTMESH_H
#define MONARCH_RUNTIME_HOST_HOSTMESH_H

#include "monarch/runtime/proc/Host.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace monarch {
class Runtime;
}

namespace monarch::host {

struct HostMeshOptions {
  /// Name of the host dimension of spawned proc meshes.
  std::string dim = "hosts";
  /// Bound on attaching and on each launch request.
  std::chrono::milliseconds requestTimeout{10000};
  std::chrono::milliseconds heartbeatInterval{500};
  /// Silence after which a host counts as lost (and, on the agent's side,
  /// the controller as gone).
  std::chrono::milliseconds heartbeatTimeout{5000};
};

class AgentConnection;

class HostMesh {
public:
  /// Attaches to every agent (all or nothing). `agentAddrs` are resolved
  /// tcp:// addresses (HostAddresses.h). The runtime (default: the global
  /// one) must listen on TCP at an address the hosts can reach, with the
  /// agents' job secret: see listenForHosts.
  static Expected<std::shared_ptr<HostMesh>>
  attach(const std::vector<std::string> &agentAddrs,
         HostMeshOptions options = {}, Runtime *runtime = nullptr);
  /// Detaches; agents kill the procs of this controller.
  ~HostMesh();
  HostMesh(const HostMesh &) = delete;
  HostMesh &operator=(const HostMesh &) = delete;

  size_t size() const { return agents.size(); }
  /// {{options.dim, size()}}.
  Shape shape() const;
  /// The name each agent reported (its --name or host name).
  const std::string &hostName(size_t host) const;
  const std::string &agentAddr(size_t host) const;
  /// True until the host is lost.
  bool hostAlive(size_t host) const;

  /// One proc per point of `perHost` on every host, as a proc mesh of shape
  /// {dim: size()} + perHost. The workers listen on TCP at their host's
  /// agent address; `options.transport`/`tcpHost` are ignored.
  Expected<ProcMesh> spawnProcs(const Shape &perHost,
                                SpawnProcsOptions options = {}) const;

private:
  HostMesh(Runtime &rt, HostMeshOptions options,
           std::vector<std::shared_ptr<AgentConnection>> agents);
  Runtime &rt;
  HostMeshOptions options;
  std::vector<std::shared_ptr<AgentConnection>> agents;
  std::vector<std::string> names;
};

/// Makes the global runtime, when first used, listen on TCP at the local
/// address that routes to the first agent, with the job secret `secret`
/// (raw bytes). Call before anything uses the global runtime.
Status listenForHosts(const std::vector<std::string> &agentAddrs,
                      const std::string &secret);

} // namespace monarch::host

#endif // MONARCH_RUNTIME_HOST_HOSTMESH_H
