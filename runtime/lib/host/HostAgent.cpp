#include "monarch/runtime/host/HostAgent.h"

#include "HostProtocol.h"
#include "monarch/runtime/host/HostAddresses.h"
#include "monarch/runtime/proc/ProcLauncher.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/transport/ChannelAddr.h"
#include "monarch/runtime/util/Log.h"

#include <asio.hpp>

#include <condition_variable>
#include <map>
#include <optional>
#include <unistd.h>

namespace monarch::host {

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kWatchPeriod{100};
/// Bytes queued toward the controller past which workers' output lines are
/// dropped (and counted) rather than queued: a slow controller costs lines,
/// never the agent's memory or a worker blocked on a full pipe.
constexpr size_t kLogQueueBound = 8u << 20;

/// The controller being served.
struct Session {
  uint64_t generation = 0;
  std::string controllerAddr;
  uint64_t eventPort = 0;
  std::shared_ptr<transport::Link> link;
  Clock::time_point lastHeard;
  std::chrono::milliseconds heartbeatTimeout{10000};
};

std::string thisHostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0)
    return "localhost";
  return buf;
}
} // namespace

// Everything but construction, start and stop runs on the runtime's io
// thread: requests, timers and proc exits, so the state needs no lock.
struct HostAgent::Impl {
  HostAgentOptions options;
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<LocalProcLauncher> launcher;
  std::unique_ptr<asio::steady_timer> watch;
  std::string advertised;

  std::optional<Session> session;
  uint64_t generations = 0;
  uint64_t procIds = 0;
  std::map<uint64_t, std::unique_ptr<LaunchedProc>> procs;
  /// Output lines of a proc dropped since its last Log event.
  std::map<uint64_t, uint64_t> droppedLines;

  std::mutex stopMu;
  std::condition_variable stopCv;
  bool stopRequested = false;

  void handle(transport::Message &&m);
  void attach(const proto::host::Attach &a);
  void launch(const proto::host::Launch &l);
  void send(const proto::host::Event &e);
  void forwardLog(uint64_t id, uint64_t generation, const std::string &prefix,
                  bool isStderr, std::vector<std::string> &&lines);
  void flushDropped(uint64_t id);
  void endSession(const std::string &why);
  void armWatch();
};

HostAgent::HostAgent(HostAgentOptions options)
    : impl(std::make_unique<Impl>()) {
  impl->options = std::move(options);
  if (impl->options.name.empty())
    impl->options.name = thisHostName();
}

HostAgent::~HostAgent() {
  if (!impl->rt)
    return;
  // Take the procs off the io thread, then end them here, where waiting for
  // their exit is allowed.
  std::map<uint64_t, std::unique_ptr<LaunchedProc>> procs;
  impl->rt->runOnIo([&] {
    procs.swap(impl->procs);
    impl->session.reset();
    if (impl->watch)
      impl->watch->cancel();
  });
  procs.clear();
  impl->rt->runOnIo([&] { impl->watch.reset(); });
  impl->rt.reset();
}

Status HostAgent::start() {
  auto listen = transport::ChannelAddr::parse(impl->options.listenAddr);
  if (!listen.ok())
    return listen.status();
  if (listen->kind != transport::TransportKind::Tcp)
    return Status(ErrorCode::Invalid, "a host agent listens on tcp://IP:PORT, "
                                      "not " +
                                          impl->options.listenAddr);
  if (impl->options.secret.empty())
    return Status(ErrorCode::Invalid, "a host agent needs the job secret");
  RuntimeOptions ro;
  ro.secret = impl->options.secret;
  ro.listenAddr = impl->options.listenAddr;
  ro.procId = "host-agent/" + impl->options.name;
  impl->rt = std::make_unique<Runtime>(ro);
  if (Status s = impl->rt->start(); !s.isOk())
    return s;
  auto bound = transport::ChannelAddr::parse(impl->rt->addr());
  if (!bound.ok())
    return bound.status();
  if (bound->host == "0.0.0.0" || bound->host == "::") {
    std::string host = impl->options.advertiseHost.empty()
                           ? thisHostName()
                           : impl->options.advertiseHost;
    auto ip = resolveHost(host);
    if (!ip.ok())
      return ip.status();
    bound->host = *ip;
  }
  impl->advertised = bound->toString();
  impl->launcher =
      std::make_unique<LocalProcLauncher>(impl->rt->transport().io());
  Impl *self = impl.get();
  impl->rt->router().setServiceHandler(
      [self](transport::Message &&m) { self->handle(std::move(m)); });
  impl->rt->runOnIo([self] {
    self->watch =
        std::make_unique<asio::steady_timer>(self->rt->transport().io());
    self->armWatch();
  });
  return Status::ok();
}

const std::string &HostAgent::addr() const { return impl->advertised; }
const std::string &HostAgent::name() const { return impl->options.name; }

bool HostAgent::waitForStop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl->stopMu);
  return impl->stopCv.wait_for(lock, timeout,
                               [&] { return impl->stopRequested; });
}

void HostAgent::requestStop() {
  std::lock_guard<std::mutex> guard(impl->stopMu);
  impl->stopRequested = true;
  impl->stopCv.notify_all();
}

void HostAgent::Impl::armWatch() {
  watch->expires_after(kWatchPeriod);
  watch->async_wait([this](asio::error_code ec) {
    if (ec)
      return;
    if (session &&
        Clock::now() - session->lastHeard > session->heartbeatTimeout)
      endSession("no heartbeat from controller " + session->controllerAddr +
                 " for " + std::to_string(session->heartbeatTimeout.count()) +
                 " ms");
    armWatch();
  });
}

void HostAgent::Impl::handle(transport::Message &&m) {
  proto::host::Request request;
  if (!unwrapHostMessage(m, request)) {
    log::error("host agent: ignoring a message that is not a host request");
    return;
  }
  if (request.body_case() == proto::host::Request::kAttach) {
    attach(request.attach());
    return;
  }
  if (!session || request.controller_addr() != session->controllerAddr) {
    log::warning("host agent '", options.name, "': ignoring a request of ",
                 request.controller_addr().empty() ? "an unknown controller"
                                                   : request.controller_addr(),
                 ", which it does not serve");
    return;
  }
  session->lastHeard = Clock::now();
  switch (request.body_case()) {
  case proto::host::Request::kLaunch:
    launch(request.launch());
    return;
  case proto::host::Request::kKill: {
    auto it = procs.find(request.kill().proc_id());
    if (it != procs.end())
      it->second->kill(request.kill().signal());
    return;
  }
  case proto::host::Request::kDetach:
    endSession("controller detached");
    return;
  case proto::host::Request::kHeartbeat: {
    proto::host::Event e;
    *e.mutable_heartbeat() = request.heartbeat();
    send(e);
    return;
  }
  default:
    log::error("host agent: empty request");
  }
}

void HostAgent::Impl::attach(const proto::host::Attach &a) {
  if (session && session->controllerAddr != a.controller_addr() &&
      !session->link->isClosed()) {
    // Busy: answer on a connection of its own, then drop it.
    proto::host::Event e;
    e.mutable_refused()->set_reason("host agent '" + options.name +
                                    "' already serves controller " +
                                    session->controllerAddr);
    auto addr = transport::ChannelAddr::parse(a.controller_addr());
    if (addr.ok())
      rt->transport().connect(*addr)->send(wrapHostMessage(e, a.event_port()));
    return;
  }
  if (session)
    endSession("a new controller attached");
  auto addr = transport::ChannelAddr::parse(a.controller_addr());
  if (!addr.ok()) {
    log::error("host agent: bad controller address ", a.controller_addr());
    return;
  }
  Session s;
  s.generation = ++generations;
  s.controllerAddr = a.controller_addr();
  s.eventPort = a.event_port();
  s.link = rt->transport().connect(*addr);
  s.lastHeard = Clock::now();
  if (a.heartbeat_timeout_ms() > 0)
    s.heartbeatTimeout = std::chrono::milliseconds(a.heartbeat_timeout_ms());
  uint64_t generation = s.generation;
  session = std::move(s);
  log::info("host agent '", options.name, "': serving controller ",
            a.controller_addr());
  session->link->onClose([this, generation](const Status &why) {
    asio::post(rt->transport().io(), [this, generation, why] {
      if (session && session->generation == generation)
        endSession("controller connection closed (" + why.message() + ")");
    });
  });
  proto::host::Event e;
  e.mutable_attached()->set_host_name(options.name);
  e.mutable_attached()->set_agent_pid(::getpid());
  send(e);
}

void HostAgent::Impl::launch(const proto::host::Launch &l) {
  proto::host::Event e;
  auto *reply = e.mutable_launched();
  reply->set_request_id(l.request_id());
  if (!session) {
    reply->set_error("no controller attached");
    return;
  }
  uint64_t id = ++procIds;
  uint64_t generation = session->generation;
  ProcLaunchSpec spec;
  spec.bootstrap = l.bootstrap();
  spec.workerPath = l.worker_path();
  spec.args.assign(l.args().begin(), l.args().end());
  for (const auto &[key, value] : l.env())
    spec.env.emplace_back(key, value);
  spec.logPrefix = l.log_prefix();
  spec.logSink = [this, id, generation, prefix = spec.logPrefix](
                     bool isStderr, std::vector<std::string> &&lines) {
    forwardLog(id, generation, prefix, isStderr, std::move(lines));
  };
  auto launched = launcher->launch(spec);
  if (!launched.ok()) {
    reply->set_error(launched.status().message());
    send(e);
    return;
  }
  reply->set_proc_id(id);
  reply->set_pid((*launched)->pid());
  (*launched)->onExit([this, id, generation](const std::string &how) {
    asio::post(rt->transport().io(), [this, id, generation, how] {
      procs.erase(id);
      if (!session || session->generation != generation) {
        droppedLines.erase(id);
        return;
      }
      flushDropped(id);
      proto::host::Event exited;
      exited.mutable_exited()->set_proc_id(id);
      exited.mutable_exited()->set_how(how);
      send(exited);
    });
  });
  procs[id] = std::move(*launched);
  send(e);
}

void HostAgent::Impl::send(const proto::host::Event &e) {
  if (session)
    session->link->send(wrapHostMessage(e, session->eventPort));
}

void HostAgent::Impl::forwardLog(uint64_t id, uint64_t generation,
                                 const std::string &prefix, bool isStderr,
                                 std::vector<std::string> &&lines) {
  if (!session || session->generation != generation) {
    // The controller is gone: the agent's own output keeps the lines.
    printProcLines(isStderr, prefix, lines);
    return;
  }
  if (session->link->queuedBytes() > kLogQueueBound) {
    droppedLines[id] += lines.size();
    return;
  }
  proto::host::Event e;
  auto *log = e.mutable_log();
  log->set_proc_id(id);
  log->set_is_stderr(isStderr);
  if (auto it = droppedLines.find(id); it != droppedLines.end()) {
    log->set_dropped(it->second);
    droppedLines.erase(it);
  }
  for (auto &line : lines)
    log->add_lines(std::move(line));
  send(e);
}

void HostAgent::Impl::flushDropped(uint64_t id) {
  auto it = droppedLines.find(id);
  if (it == droppedLines.end())
    return;
  proto::host::Event e;
  e.mutable_log()->set_proc_id(id);
  e.mutable_log()->set_dropped(it->second);
  droppedLines.erase(it);
  send(e);
}

void HostAgent::Impl::endSession(const std::string &why) {
  if (!session)
    return;
  log::info("host agent '", options.name, "': controller ",
            session->controllerAddr, " gone: ", why, "; killing ", procs.size(),
            " procs");
  procs.clear(); // SIGKILLs each; their exits are reaped on this thread
  droppedLines.clear();
  session->link->close();
  session.reset();
}

} // namespace monarch::host
