//===- HostAgent.h - The per-host agent that starts worker procs -*- C++
//-*-===//
//
// One agent runs on every host of a multi-host job (build/bin/monarch-host,
// started by the scheduler, e.g. `srun`). It listens on a TCP address,
// accepts only connections that prove the job secret, and serves one
// controller at a time: it starts worker procs with the local launcher when
// asked, reports how each ended, and heartbeats. When its controller goes
// away (connection closed, or no heartbeat for the agreed time) it kills the
// procs it started and waits for the next controller.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_HOST_HOSTAGENT_H
#define MONARCH_RUNTIME_HOST_HOSTAGENT_H

#include "monarch/runtime/util/Status.h"

#include <chrono>
#include <memory>
#include <string>

namespace monarch::host {

struct HostAgentOptions {
  /// Where to listen, "tcp://IP:PORT" (port 0: any free port).
  std::string listenAddr;
  /// The host part published in addr() when listening on a wildcard address
  /// (0.0.0.0 or ::); default: this host's name, resolved.
  std::string advertiseHost;
  /// Name in supervision messages; default: the host name.
  std::string name;
  /// The raw job secret (JobSecret.h).
  std::string secret;
};

class HostAgent {
public:
  explicit HostAgent(HostAgentOptions options);
  /// Kills every proc still running and closes the listener.
  ~HostAgent();
  HostAgent(const HostAgent &) = delete;
  HostAgent &operator=(const HostAgent &) = delete;

  Status start();
  /// "tcp://IP:PORT" controllers connect to (valid after start()).
  const std::string &addr() const;
  const std::string &name() const;

  /// Serves until requestStop(); false when `timeout` passed first.
  bool waitForStop(std::chrono::milliseconds timeout);
  void requestStop();

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace monarch::host

#endif // MONARCH_RUNTIME_HOST_HOSTAGENT_H
