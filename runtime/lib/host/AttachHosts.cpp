#include "monarch/runtime/host/AttachHosts.h"

#include "monarch/runtime/host/HostAddresses.h"
#include "monarch/runtime/host/JobSecret.h"
#include "monarch/runtime/host/SlurmAgents.h"
#include "monarch/runtime/proc/ProcLauncher.h"
#include "monarch/runtime/proc/Runtime.h"

#include <cstdlib>
#include <unistd.h>

namespace monarch::host {

AttachedHosts::~AttachedHosts() {
  hostMesh.reset(); // detach first, then end the agents' step
  slurm.reset();
}

std::string locateHostAgent() {
  if (const char *env = std::getenv("MONARCH_HOST_AGENT"))
    if (*env)
      return env;
  std::string self = currentExecutable();
  std::string beside = self.substr(0, self.rfind('/') + 1) + "monarch-host";
  if (::access(beside.c_str(), X_OK) == 0)
    return beside;
#ifdef MONARCH_DEFAULT_HOST_AGENT_PATH
  return MONARCH_DEFAULT_HOST_AGENT_PATH;
#else
  return "monarch-host";
#endif
}

Expected<std::unique_ptr<AttachedHosts>>
attachHosts(const HostSource &source, HostMeshOptions options,
            std::chrono::milliseconds timeout) {
  int given = !source.hosts.empty() + !source.hostsFile.empty() + source.slurm;
  if (given != 1)
    return Status(ErrorCode::Invalid,
                  "give exactly one of a host list, a hosts file or SLURM");
  std::unique_ptr<AttachedHosts> attached(new AttachedHosts());
  std::vector<std::string> addrs;
  if (source.slurm) {
    std::string controllerHost = source.controllerHost;
    if (controllerHost.empty()) {
      char name[256] = {0};
      ::gethostname(name, sizeof(name) - 1);
      controllerHost = name;
    }
    auto ip = resolveHost(controllerHost);
    if (!ip.ok())
      return ip.status();
    // A fresh secret per process (its runtime is configured once): to the
    // agents on srun's stdin, to this runtime in memory.
    static const std::string hex = newSecretHex();
    RuntimeOptions ro;
    ro.secret = *secretFromHex(hex);
    ro.listenAddr = "tcp://" + *ip + ":0";
    Runtime::setGlobalOptions(ro);
    SlurmAgentsOptions so;
    so.agentPath =
        source.agentPath.empty() ? locateHostAgent() : source.agentPath;
    so.secretHex = hex;
    so.controllerHost = *ip;
    so.agentsPerNode = source.agentsPerNode;
    so.timeout = timeout;
    auto started = SlurmAgents::start(so);
    if (!started.ok())
      return started.status();
    attached->slurm = std::move(*started);
    addrs = attached->slurm->addresses();
  } else {
    if (source.secretFile.empty())
      return Status(ErrorCode::Invalid,
                    "attaching to running host agents needs their job "
                    "secret file");
    std::vector<std::string> listed;
    for (const auto &h : source.hosts) {
      auto addr = agentAddress(h);
      if (!addr.ok())
        return addr.status();
      listed.push_back(*addr);
    }
    if (!source.hostsFile.empty()) {
      auto fromFile = readHostsFile(source.hostsFile);
      if (!fromFile.ok())
        return fromFile.status();
      listed = *fromFile;
    }
    addrs = listed;
    auto secret = readSecret(source.secretFile);
    if (!secret.ok())
      return secret.status();
    if (Status s = listenForHosts(addrs, *secret); !s.isOk())
      return s;
  }
  auto mesh = HostMesh::attach(addrs, std::move(options));
  if (!mesh.ok())
    return mesh.status();
  attached->hostMesh = *mesh;
  return attached;
}

} // namespace monarch::host
