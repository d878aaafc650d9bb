//===- SlurmAgents.h - Host agents started by srun in an allocation -*- C++
//-*-===//
//
// `monarch-run --slurm` (AttachHosts.h) runs inside a SLURM allocation (sbatch
// or salloc) and starts the host agents as one job step:
//
//   srun --nodes=$SLURM_JOB_NUM_NODES --ntasks-per-node=K --input=all \
//        monarch-host --listen tcp://0.0.0.0:0 --secret-file - \
//                     --reachable-from CONTROLLER --name-from-slurm
//
// The job secret goes to every agent on srun's stdin; each agent prints the
// address it serves on, which is read from srun's stdout (the rest of that
// output -- the workers' logs -- is passed through). Destroying the object
// ends the step.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_HOST_SLURMAGENTS_H
#define MONARCH_RUNTIME_HOST_SLURMAGENTS_H

#include "monarch/runtime/util/Status.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace monarch::host {

struct SlurmAgentsOptions {
  std::string agentPath;      ///< monarch-host
  std::string secretHex;      ///< goes to the agents on stdin
  std::string controllerHost; ///< the agents publish the address routing here
  int agentsPerNode = 1;
  std::chrono::milliseconds timeout{60000};
};

class SlurmAgents {
public:
  /// Fails outside an allocation (no $SLURM_JOB_ID) or when the agents do
  /// not all report in time.
  static Expected<std::unique_ptr<SlurmAgents>>
  start(const SlurmAgentsOptions &options);
  /// SIGTERMs the step (srun forwards it to the agents), SIGKILL after 10 s.
  ~SlurmAgents();

  /// The agents' addresses, in SLURM task order.
  const std::vector<std::string> &addresses() const { return addrs; }

private:
  SlurmAgents() = default;
  int srunPid = -1;
  int outFd = -1;
  std::vector<std::string> addrs;
  std::thread forwarder;
};

} // namespace monarch::host

#endif // MONARCH_RUNTIME_HOST_SLURMAGENTS_H
