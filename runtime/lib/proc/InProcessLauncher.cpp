#include "monarch/runtime/proc/InProcessLauncher.h"

#include "monarch/runtime/proc/Liveness.h"
#include "monarch/runtime/proc/ProcServer.h"
#include "monarch/runtime/proc/Runtime.h"

#include <condition_variable>
#include <dlfcn.h>
#include <mutex>
#include <unistd.h>

namespace monarch {

namespace {

class InProcessProc : public LaunchedProc {
public:
  InProcessProc(std::unique_ptr<Runtime> rt, std::unique_ptr<ProcServer> server)
      : rt(std::move(rt)), server(std::move(server)) {}
  ~InProcessProc() override { kill(9); }

  int pid() const override { return static_cast<int>(::getpid()); }
  void onExit(std::function<void(const std::string &)> handler) override {
    std::lock_guard<std::mutex> guard(mu);
    if (!exited)
      handlers.push_back(std::move(handler));
  }
  bool hasExited() const override {
    std::lock_guard<std::mutex> guard(mu);
    return exited;
  }
  bool waitExited(std::chrono::milliseconds timeout) override {
    // StopProc makes the server ask to stop; the proc then goes away.
    if (server && server->waitForStop(timeout))
      kill(0);
    return hasExited();
  }
  void kill(int) override {
    std::vector<std::function<void(const std::string &)>> toRun;
    {
      std::lock_guard<std::mutex> guard(mu);
      if (exited)
        return;
      exited = true;
      toRun.swap(handlers);
    }
    rt.reset(); // closes its listener: peers see the proc go away
    server.reset();
    for (auto &h : toRun)
      h("stopped (in-process proc)");
  }

private:
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<ProcServer> server;
  mutable std::mutex mu;
  bool exited = false;
  std::vector<std::function<void(const std::string &)>> handlers;
};

} // namespace

Expected<std::unique_ptr<LaunchedProc>>
InProcessLauncher::launch(const ProcLaunchSpec &spec) {
  const auto &boot = spec.bootstrap;
  for (const auto &lib : boot.actor_libraries())
    if (!::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL))
      return Status(ErrorCode::NotFound,
                    "cannot load actor library " + lib + ": " + ::dlerror());
  RuntimeOptions options;
  options.secret = boot.secret();
  options.listenAddr = "inproc://0";
  options.procId = boot.proc_id();
  options.castFanout = boot.fanout();
  auto rt = std::make_unique<Runtime>(options);
  Status started = rt->start();
  if (!started.isOk())
    return started;
  auto server = std::make_unique<ProcServer>(*rt, boot.proc_id(), boot.rank());
  ProcServer *serverPtr = server.get();
  rt->router().setServiceHandler(
      [serverPtr](transport::Message &&m) { serverPtr->handle(std::move(m)); });
  auto parent = rt->link(boot.parent_addr());
  if (!parent.ok())
    return parent.status();
  (*parent)->send(procReadyMessage(boot, *rt));
  HeartbeatSender::start(*rt, boot);
  return std::unique_ptr<LaunchedProc>(
      std::make_unique<InProcessProc>(std::move(rt), std::move(server)));
}

} // namespace monarch
