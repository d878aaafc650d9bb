//===- AgentConnection.h - The controller's side of one host agent -*- C++
//-*-===//
//
// Holds the link to one agent and the port its events arrive on, matches
// launch replies to requests, heartbeats the agent and turns the agent's exit
// reports -- or the loss of the host -- into the exits of RemoteProcs.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_LIB_HOST_AGENTCONNECTION_H
#define MONARCH_RUNTIME_LIB_HOST_AGENTCONNECTION_H

#include "host.pb.h"
#include "monarch/runtime/host/HostMesh.h"
#include "monarch/runtime/proc/ProcLauncher.h"
#include "monarch/runtime/transport/Transport.h"

#include <asio.hpp>

#include <condition_variable>
#include <map>
#include <mutex>

namespace monarch::host {

/// How one remote proc is doing; completed once, by the agent's report or by
/// the loss of the host.
struct RemoteExit {
  std::mutex mu;
  std::condition_variable cv;
  bool exited = false;
  std::string how;
  std::vector<std::function<void(const std::string &)>> handlers;
  void complete(const std::string &description);
};

class AgentConnection : public std::enable_shared_from_this<AgentConnection> {
public:
  AgentConnection(Runtime &rt, std::string addr, HostMeshOptions options);
  ~AgentConnection();

  /// Sends Attach; finishAttach waits for the answer (two steps so a mesh
  /// attaches to all its agents at once).
  Status startAttach();
  Status finishAttach();

  Expected<std::unique_ptr<LaunchedProc>> launch(const ProcLaunchSpec &spec);
  void kill(uint64_t procId, int signal);
  /// Stops heartbeats and closes the link (the agent then ends our procs).
  void detach();

  const std::string &addr() const { return agentAddr; }
  std::string name() const;
  bool alive() const;
  /// "host 'NAME' (ADDR)".
  std::string describe() const;

private:
  void onEvent(transport::Message &&m);
  /// Prints a remote proc's output lines here, "[PREFIX] line".
  void printLog(const proto::host::Log &log);
  void lost(const std::string &reason);
  void heartbeat();
  void send(proto::host::Request r);

  Runtime &rt;
  std::string agentAddr;
  HostMeshOptions options;
  std::shared_ptr<transport::Link> link;
  uint64_t eventPort = 0;
  std::unique_ptr<asio::steady_timer> timer;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool attached = false;
  std::string refused;
  std::string hostName;
  std::string lossReason;
  bool isLost = false;
  bool detached = false;
  std::chrono::steady_clock::time_point lastReply;
  uint64_t heartbeats = 0;
  uint64_t requests = 0;
  std::map<uint64_t, proto::host::Launched> launchReplies;
  std::map<uint64_t, std::shared_ptr<RemoteExit>> procs;
  /// The log prefix of each running proc ("procs1 rank 3 on mh1"), and of
  /// each launch request not answered yet: its lines may arrive right after
  /// the answer, before the requesting thread wakes.
  std::map<uint64_t, std::string> logPrefixes;
  std::map<uint64_t, std::string> requestPrefixes;
};

} // namespace monarch::host

#endif // MONARCH_RUNTIME_LIB_HOST_AGENTCONNECTION_H
