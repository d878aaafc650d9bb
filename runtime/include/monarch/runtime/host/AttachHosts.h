//===- AttachHosts.h - A host mesh from a list, a file or SLURM -*- C++ -*-===//
//
// What monarch-run's --hosts / --hosts-file / --slurm and the Python
// frontend's `hosts=` / `slurm=True` do: find the host agents (or, in a SLURM
// allocation, start them with srun), configure the controller's runtime (TCP
// address, job secret) and attach.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_HOST_ATTACHHOSTS_H
#define MONARCH_RUNTIME_HOST_ATTACHHOSTS_H

#include "monarch/runtime/host/HostMesh.h"

namespace monarch::host {

class SlurmAgents;

struct HostSource {
  /// Running agents, "HOST:PORT" each; or
  std::vector<std::string> hosts;
  /// a file of them, one per line; both need
  std::string hostsFile;
  /// the agents' job secret (JobSecret.h).
  std::string secretFile;
  /// Or: start agents with srun inside this SLURM allocation.
  bool slurm = false;
  /// The controller's address as the nodes see it; default: this host's
  /// name, resolved.
  std::string controllerHost;
  int agentsPerNode = 1;
  /// monarch-host: default $MONARCH_HOST_AGENT, else beside this
  /// executable, else the path it was built at.
  std::string agentPath;
};

/// A host mesh and, under SLURM, the job step running its agents.
class AttachedHosts {
public:
  ~AttachedHosts();
  const std::shared_ptr<HostMesh> &mesh() const { return hostMesh; }

private:
  friend Expected<std::unique_ptr<AttachedHosts>>
  attachHosts(const HostSource &, HostMeshOptions, std::chrono::milliseconds);
  AttachedHosts() = default;
  std::unique_ptr<SlurmAgents> slurm; // outlives the mesh (declared first)
  std::shared_ptr<HostMesh> hostMesh;
};

/// Must run before anything uses the global runtime. `timeout` bounds
/// starting the SLURM agents.
Expected<std::unique_ptr<AttachedHosts>>
attachHosts(const HostSource &source, HostMeshOptions options,
            std::chrono::milliseconds timeout);

/// The monarch-host binary (see HostSource::agentPath).
std::string locateHostAgent();

} // namespace monarch::host

#endif // MONARCH_RUNTIME_HOST_ATTACHHOSTS_H
