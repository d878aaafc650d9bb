#include "AgentConnection.h"

#include "HostProtocol.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/transport/ChannelAddr.h"
#include "monarch/runtime/util/Log.h"

#include <csignal>

namespace monarch::host {

using Clock = std::chrono::steady_clock;

void RemoteExit::complete(const std::string &description) {
  std::vector<std::function<void(const std::string &)>> toRun;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (exited)
      return;
    exited = true;
    how = description;
    toRun.swap(handlers);
  }
  cv.notify_all();
  for (auto &h : toRun)
    h(description);
}

namespace {

class RemoteProc : public LaunchedProc {
public:
  RemoteProc(std::shared_ptr<AgentConnection> agent, uint64_t id, int pid,
             std::shared_ptr<RemoteExit> exit)
      : agent(std::move(agent)), id(id), processId(pid), exit(std::move(exit)) {
  }
  ~RemoteProc() override {
    if (!hasExited())
      agent->kill(id, SIGKILL);
  }
  int pid() const override { return processId; }
  void onExit(std::function<void(const std::string &)> handler) override {
    std::unique_lock<std::mutex> lock(exit->mu);
    if (!exit->exited) {
      exit->handlers.push_back(std::move(handler));
      return;
    }
    std::string how = exit->how;
    lock.unlock();
    handler(how);
  }
  bool hasExited() const override {
    std::lock_guard<std::mutex> guard(exit->mu);
    return exit->exited;
  }
  bool waitExited(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(exit->mu);
    return exit->cv.wait_for(lock, timeout, [&] { return exit->exited; });
  }
  // Only sends: callers may hold their mesh's lock, and the exit report
  // comes back later through the agent.
  void kill(int signal) override {
    if (!hasExited())
      agent->kill(id, signal);
  }

private:
  std::shared_ptr<AgentConnection> agent;
  uint64_t id;
  int processId;
  std::shared_ptr<RemoteExit> exit;
};

} // namespace

AgentConnection::AgentConnection(Runtime &rt, std::string addr,
                                 HostMeshOptions options)
    : rt(rt), agentAddr(std::move(addr)), options(std::move(options)) {}

AgentConnection::~AgentConnection() { detach(); }

std::string AgentConnection::name() const {
  std::lock_guard<std::mutex> guard(mu);
  return hostName;
}

bool AgentConnection::alive() const {
  std::lock_guard<std::mutex> guard(mu);
  return attached && !isLost && !detached;
}

std::string AgentConnection::describe() const {
  std::lock_guard<std::mutex> guard(mu);
  return "host '" + (hostName.empty() ? std::string("?") : hostName) + "' (" +
         agentAddr + ")";
}

void AgentConnection::send(proto::host::Request r) {
  r.set_controller_addr(rt.addr());
  std::shared_ptr<transport::Link> l;
  {
    std::lock_guard<std::mutex> guard(mu);
    l = link;
  }
  if (l)
    l->send(wrapHostMessage(r, 0));
}

Status AgentConnection::startAttach() {
  auto parsed = transport::ChannelAddr::parse(agentAddr);
  if (!parsed.ok())
    return parsed.status();
  std::weak_ptr<AgentConnection> weak = shared_from_this();
  eventPort = rt.router().openPort([weak](transport::Message &&m) {
    if (auto self = weak.lock())
      self->onEvent(std::move(m));
  });
  auto connected = rt.transport().connect(*parsed);
  {
    std::lock_guard<std::mutex> guard(mu);
    link = connected;
  }
  connected->onClose([weak](const Status &why) {
    if (auto self = weak.lock())
      self->lost("connection to its agent closed (" + why.message() + ")");
  });
  proto::host::Request r;
  auto *a = r.mutable_attach();
  a->set_controller_addr(rt.addr());
  a->set_event_port(eventPort);
  a->set_heartbeat_timeout_ms(options.heartbeatTimeout.count());
  send(r);
  return Status::ok();
}

Status AgentConnection::finishAttach() {
  std::unique_lock<std::mutex> lock(mu);
  bool answered = cv.wait_for(lock, options.requestTimeout, [&] {
    return attached || !refused.empty() || isLost;
  });
  if (!refused.empty())
    return Status(ErrorCode::Closed,
                  "host agent " + agentAddr + " refused to attach: " + refused);
  if (isLost)
    return Status(ErrorCode::Closed,
                  "cannot attach to host agent " + agentAddr + ": " +
                      lossReason +
                      " (is it running, and does it hold this job's secret?)");
  if (!answered)
    return Status(ErrorCode::Timeout,
                  "host agent " + agentAddr + " did not answer within " +
                      std::to_string(options.requestTimeout.count()) + " ms");
  lastReply = Clock::now();
  lock.unlock();
  std::weak_ptr<AgentConnection> weak = shared_from_this();
  rt.runOnIo([this, weak] {
    timer = std::make_unique<asio::steady_timer>(rt.transport().io());
    heartbeat();
  });
  return Status::ok();
}

void AgentConnection::heartbeat() {
  // Runs on the io thread; the timer is owned here, the callback holds a
  // weak reference only.
  std::weak_ptr<AgentConnection> weak = shared_from_this();
  timer->expires_after(options.heartbeatInterval);
  timer->async_wait([weak](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self)
      return;
    uint64_t serial;
    Clock::duration silent;
    {
      std::lock_guard<std::mutex> guard(self->mu);
      if (self->isLost || self->detached)
        return;
      serial = ++self->heartbeats;
      silent = Clock::now() - self->lastReply;
    }
    if (silent > self->options.heartbeatTimeout) {
      self->lost(
          "no heartbeat for " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(silent)
                  .count()) +
          " ms");
      return;
    }
    proto::host::Request r;
    r.mutable_heartbeat()->set_serial(serial);
    self->send(r);
    self->heartbeat();
  });
}

void AgentConnection::onEvent(transport::Message &&m) {
  proto::host::Event e;
  if (!unwrapHostMessage(m, e)) {
    log::error("controller: malformed event from host agent ", agentAddr);
    return;
  }
  std::shared_ptr<RemoteExit> exit;
  std::string how;
  {
    std::lock_guard<std::mutex> guard(mu);
    lastReply = Clock::now();
    switch (e.body_case()) {
    case proto::host::Event::kAttached:
      attached = true;
      hostName = e.attached().host_name();
      break;
    case proto::host::Event::kRefused:
      refused = e.refused().reason();
      break;
    case proto::host::Event::kLaunched: {
      uint64_t request = e.launched().request_id();
      auto prefix = requestPrefixes.find(request);
      if (prefix != requestPrefixes.end()) {
        if (e.launched().proc_id() != 0)
          logPrefixes[e.launched().proc_id()] = std::move(prefix->second);
        requestPrefixes.erase(prefix);
      }
      launchReplies[request] = e.launched();
      break;
    }
    case proto::host::Event::kLog:
      break;
    case proto::host::Event::kExited: {
      logPrefixes.erase(e.exited().proc_id());
      auto it = procs.find(e.exited().proc_id());
      if (it != procs.end()) {
        exit = it->second;
        procs.erase(it);
        how =
            "host '" + hostName + "' (" + agentAddr + "): " + e.exited().how();
      }
      break;
    }
    default:
      break;
    }
  }
  cv.notify_all();
  if (e.body_case() == proto::host::Event::kLog)
    printLog(e.log());
  if (exit)
    exit->complete(how);
}

void AgentConnection::printLog(const proto::host::Log &log) {
  std::string prefix;
  {
    std::lock_guard<std::mutex> guard(mu);
    auto it = logPrefixes.find(log.proc_id());
    prefix = it != logPrefixes.end()
                 ? it->second
                 : "proc " + std::to_string(log.proc_id()) + " on " + hostName;
  }
  if (log.dropped() > 0)
    printProcLines(log.is_stderr(), prefix,
                   std::vector<std::string>{
                       "(" + std::to_string(log.dropped()) +
                       " lines dropped: the controller did not keep up)"});
  printProcLines(log.is_stderr(), prefix, log.lines());
}

void AgentConnection::lost(const std::string &reason) {
  std::map<uint64_t, std::shared_ptr<RemoteExit>> orphans;
  std::string what;
  bool wasAttached;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (isLost || detached)
      return;
    isLost = true;
    wasAttached = attached;
    lossReason = reason;
    orphans.swap(procs);
    what = "host '" + (hostName.empty() ? std::string("?") : hostName) + "' (" +
           agentAddr + ") lost: " + reason;
  }
  cv.notify_all();
  if (wasAttached)
    log::error(what);
  for (auto &[id, exit] : orphans)
    exit->complete(what);
  std::shared_ptr<transport::Link> l;
  {
    std::lock_guard<std::mutex> guard(mu);
    l = std::move(link);
  }
  if (l)
    l->close();
}

Expected<std::unique_ptr<LaunchedProc>>
AgentConnection::launch(const ProcLaunchSpec &spec) {
  proto::host::Request r;
  uint64_t id;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (isLost)
      return Status(ErrorCode::Closed, "host '" + hostName + "' (" + agentAddr +
                                           ") lost: " + lossReason);
    id = ++requests;
    requestPrefixes[id] = spec.logPrefix;
  }
  auto *l = r.mutable_launch();
  l->set_request_id(id);
  *l->mutable_bootstrap() = spec.bootstrap;
  l->set_worker_path(spec.workerPath);
  for (const auto &a : spec.args)
    l->add_args(a);
  for (const auto &[key, value] : spec.env)
    (*l->mutable_env())[key] = value;
  l->set_log_prefix(spec.logPrefix);
  send(r);
  std::unique_lock<std::mutex> lock(mu);
  bool answered = cv.wait_for(lock, options.requestTimeout, [&] {
    return launchReplies.count(id) || isLost;
  });
  std::string who = "host '" + hostName + "' (" + agentAddr + ")";
  if (!launchReplies.count(id)) {
    requestPrefixes.erase(id);
    if (isLost)
      return Status(ErrorCode::Closed, who + " lost: " + lossReason);
    (void)answered;
    return Status(ErrorCode::Timeout,
                  who + " did not start a proc within " +
                      std::to_string(options.requestTimeout.count()) + " ms");
  }
  proto::host::Launched reply = launchReplies[id];
  launchReplies.erase(id);
  if (reply.proc_id() == 0)
    return Status(ErrorCode::Internal,
                  who + " could not start a proc: " + reply.error());
  auto exit = std::make_shared<RemoteExit>();
  procs[reply.proc_id()] = exit;
  lock.unlock();
  return std::unique_ptr<LaunchedProc>(std::make_unique<RemoteProc>(
      shared_from_this(), reply.proc_id(), reply.pid(), exit));
}

void AgentConnection::kill(uint64_t procId, int signal) {
  {
    std::lock_guard<std::mutex> guard(mu);
    if (isLost || detached)
      return;
  }
  proto::host::Request r;
  r.mutable_kill()->set_proc_id(procId);
  r.mutable_kill()->set_signal(signal);
  send(r);
}

void AgentConnection::detach() {
  std::map<uint64_t, std::shared_ptr<RemoteExit>> orphans;
  std::shared_ptr<transport::Link> l;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (detached)
      return;
    detached = true;
    orphans.swap(procs);
    l = std::move(link);
  }
  cv.notify_all();
  for (auto &[id, exit] : orphans)
    exit->complete("controller detached from host '" + hostName + "'");
  if (eventPort)
    rt.router().closePort(eventPort);
  // close() runs on the io thread after the Detach was handed to the
  // socket (sends are written in order, before a later posted close).
  if (l) {
    proto::host::Request r;
    r.mutable_detach();
    r.set_controller_addr(rt.addr());
    l->send(wrapHostMessage(r, 0));
    l->close();
  }
  // The timer lives on the io thread (its callback holds only a weak
  // reference); runOnIo runs inline when already there.
  rt.runOnIo([this] { timer.reset(); });
}

} // namespace monarch::host
