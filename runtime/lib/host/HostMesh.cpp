#include "monarch/runtime/host/HostMesh.h"

#include "AgentConnection.h"
#include "monarch/runtime/host/HostAddresses.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/transport/ChannelAddr.h"

namespace monarch::host {

namespace {

/// Starts rank r on host r / procsPerHost, listening at that host's address.
class HostMeshLauncher : public ProcLauncher {
public:
  HostMeshLauncher(std::vector<std::shared_ptr<AgentConnection>> agents,
                   int64_t procsPerHost)
      : agents(std::move(agents)), procsPerHost(procsPerHost) {}

  Expected<std::unique_ptr<LaunchedProc>>
  launch(const ProcLaunchSpec &spec) override {
    size_t host = spec.bootstrap.rank() / procsPerHost;
    if (host >= agents.size())
      return Status(ErrorCode::Invalid,
                    "rank " + std::to_string(spec.bootstrap.rank()) +
                        " is past the last host");
    ProcLaunchSpec remote = spec;
    remote.bootstrap.set_listen_addr("tcp://" +
                                     tcpHostOf(agents[host]->addr()) + ":0");
    remote.logPrefix += " on " + agents[host]->name();
    return agents[host]->launch(remote);
  }

private:
  std::vector<std::shared_ptr<AgentConnection>> agents;
  int64_t procsPerHost;
};

bool isLoopback(const std::string &ip) {
  return ip.rfind("127.", 0) == 0 || ip == "::1";
}

} // namespace

HostMesh::HostMesh(Runtime &rt, HostMeshOptions options,
                   std::vector<std::shared_ptr<AgentConnection>> agents)
    : rt(rt), options(std::move(options)), agents(std::move(agents)) {
  for (const auto &a : this->agents)
    names.push_back(a->name());
}

HostMesh::~HostMesh() {
  for (auto &a : agents)
    a->detach();
}

Expected<std::shared_ptr<HostMesh>>
HostMesh::attach(const std::vector<std::string> &agentAddrs,
                 HostMeshOptions options, Runtime *runtime) {
  if (agentAddrs.empty())
    return Status(ErrorCode::Invalid, "a host mesh needs at least one host");
  Runtime &rt = runtime ? *runtime : Runtime::global();
  std::string self = tcpHostOf(rt.addr());
  if (self.empty() || self == "0.0.0.0" || self == "::")
    return Status(ErrorCode::Invalid,
                  "the controller listens on " + rt.addr() +
                      ", which other hosts cannot reach; configure it with "
                      "monarch::host::listenForHosts before first use");
  std::vector<std::shared_ptr<AgentConnection>> agents;
  for (const auto &addr : agentAddrs) {
    std::string host = tcpHostOf(addr);
    if (host.empty())
      return Status(ErrorCode::Invalid,
                    "host agent address " + addr + " is not tcp://IP:PORT");
    if (isLoopback(self) && !isLoopback(host))
      return Status(ErrorCode::Invalid, "the controller listens on loopback (" +
                                            rt.addr() + ") but host " + addr +
                                            " is elsewhere");
    for (const auto &a : agents)
      if (a->addr() == addr)
        return Status(ErrorCode::Invalid, "host " + addr + " listed twice");
    agents.push_back(std::make_shared<AgentConnection>(rt, addr, options));
  }
  for (auto &a : agents)
    if (Status s = a->startAttach(); !s.isOk())
      return s;
  for (auto &a : agents)
    if (Status s = a->finishAttach(); !s.isOk()) {
      for (auto &b : agents)
        b->detach();
      return s;
    }
  return std::shared_ptr<HostMesh>(
      new HostMesh(rt, std::move(options), std::move(agents)));
}

Shape HostMesh::shape() const {
  return {{options.dim, static_cast<int64_t>(agents.size())}};
}

const std::string &HostMesh::agentAddr(size_t host) const {
  return agents.at(host)->addr();
}

const std::string &HostMesh::hostName(size_t host) const {
  return names.at(host);
}

bool HostMesh::hostAlive(size_t host) const { return agents.at(host)->alive(); }

Expected<ProcMesh> HostMesh::spawnProcs(const Shape &perHost,
                                        SpawnProcsOptions options) const {
  int64_t procsPerHost = 1;
  for (const auto &[dim, size] : perHost) {
    if (dim == this->options.dim)
      return Status(ErrorCode::Invalid,
                    "per-host dim '" + dim + "' clashes with the host dim");
    if (size <= 0)
      return Status(ErrorCode::Invalid,
                    "dim '" + dim + "' has size " + std::to_string(size));
    procsPerHost *= size;
  }
  for (size_t h = 0; h < agents.size(); ++h)
    if (!agents[h]->alive())
      return Status(ErrorCode::Closed,
                    agents[h]->describe() + " is lost; attach a new host mesh");
  Shape shape = this->shape();
  shape.insert(shape.end(), perHost.begin(), perHost.end());
  options.transport = "tcp";
  options.launcher = std::make_shared<HostMeshLauncher>(agents, procsPerHost);
  return Host(rt).spawnProcs(shape, std::move(options));
}

Status listenForHosts(const std::vector<std::string> &agentAddrs,
                      const std::string &secret) {
  if (agentAddrs.empty())
    return Status(ErrorCode::Invalid, "no host agents given");
  std::string peer = tcpHostOf(agentAddrs.front());
  if (peer.empty())
    return Status(ErrorCode::Invalid,
                  agentAddrs.front() + " is not tcp://IP:PORT");
  auto local = localAddressToward(peer);
  if (!local.ok())
    return local.status();
  RuntimeOptions options;
  options.secret = secret;
  options.listenAddr = transport::ChannelAddr::tcp(*local, 0).toString();
  Runtime::setGlobalOptions(options);
  return Status::ok();
}

} // namespace monarch::host
