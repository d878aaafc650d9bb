#include "monarch/runtime/proc/Worker.h"

#include "monarch/runtime/proc/Liveness.h"
#include "monarch/runtime/proc/ProcServer.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace monarch {

bool isWorkerProcess() {
  return std::getenv("MONARCH_BOOTSTRAP_FD") != nullptr;
}

static bool readBootstrap(proto::Bootstrap &boot) {
  const char *fdText = std::getenv("MONARCH_BOOTSTRAP_FD");
  if (!fdText)
    return false;
  int fd = std::atoi(fdText);
  std::string bytes;
  char chunk[4096];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    bytes.append(chunk, n);
    if (bytes.size() > (1 << 20))
      return false;
  }
  ::close(fd);
  ::unsetenv("MONARCH_BOOTSTRAP_FD");
  return boot.ParseFromString(bytes);
}

int runWorker() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  proto::Bootstrap boot;
  if (!readBootstrap(boot)) {
    std::fprintf(stderr, "monarch-worker: no valid bootstrap on "
                         "$MONARCH_BOOTSTRAP_FD (start it via spawnProcs)\n");
    return 2;
  }
  for (const auto &lib : boot.actor_libraries()) {
    if (!::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      log::error("cannot load actor library ", lib, ": ", ::dlerror());
      return 3;
    }
  }
  RuntimeOptions options;
  options.secret = boot.secret();
  options.listenAddr = boot.listen_addr();
  options.procId = boot.proc_id();
  options.castFanout = boot.fanout();
  auto rt = std::make_unique<Runtime>(options);
  Status started = rt->start();
  if (!started.isOk()) {
    log::error("worker ", boot.proc_id(), ": ", started.toString());
    return 4;
  }
  Runtime::setProcessRuntime(rt.get());
  ProcServer server(*rt, boot.proc_id(), boot.rank());
  rt->router().setServiceHandler(
      [&server](transport::Message &&m) { server.handle(std::move(m)); });

  auto parent = rt->link(boot.parent_addr());
  if (!parent.ok()) {
    log::error("worker ", boot.proc_id(), ": ", parent.status().toString());
    return 5;
  }
  // The parent's listener going away means the controller is gone.
  std::atomic<bool> orphaned{false};
  (*parent)->onClose([&server, &orphaned](const Status &) {
    orphaned = true;
    server.requestStop();
  });
  (*parent)->send(procReadyMessage(boot, *rt));
  HeartbeatSender::start(*rt, boot);

  while (!server.waitForStop(std::chrono::seconds(1))) {
  }
  log::debug("worker ", boot.proc_id(), " stopping",
             orphaned ? " (parent gone)" : "");
  // Procs that actors of this worker spawned end with it (PR_SET_PDEATHSIG);
  // their sockets' directory goes now.
  rt->removePrivateDir();
  std::fflush(stdout);
  std::fflush(stderr);
  // Actor threads may still be running handlers; skip static destructors.
  std::_Exit(0);
}

} // namespace monarch
