#include "monarch/runtime/proc/Runtime.h"

#include "monarch/runtime/proc/IoLoop.h"
#include "monarch/runtime/proc/ProcLauncher.h"
#include "monarch/runtime/transport/Auth.h"
#include "monarch/runtime/util/Log.h"
#include "monarch/runtime/util/OwnedDirs.h"

#include <asio.hpp>
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <algorithm>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <dirent.h>
#include <unistd.h>

namespace monarch {

struct Runtime::WorkGuard {
  asio::executor_work_guard<asio::io_context::executor_type> guard;
};

namespace {
std::atomic<Runtime *> globalInstance{nullptr};
std::atomic<Runtime *> processInstance{nullptr};
std::mutex globalMu;
RuntimeOptions globalOptions;

/// $TMPDIR/monarch-p<ns>.<pid>-XXXXXX, removed on every exit path and, if
/// this process is SIGKILLed, by the next one (util/OwnedDirs.h).
std::string makePrivateDir() { return makeOwnedDir(""); }

void removeDir(const std::string &dir) {
  if (!dir.empty())
    removeOwnedDir(dir);
}
} // namespace

Runtime::Runtime(RuntimeOptions options) : opts(std::move(options)) {
  if (opts.secret.empty())
    opts.secret = transport::randomBytes(transport::kSecretBytes);
  if (opts.castFanout == 0)
    opts.castFanout = 1;
  ioImpl = std::make_unique<asio::io_context>(1);
  transport::TransportOptions topts;
  topts.secret = opts.secret;
  topts.maxQueuedBytes = opts.flowLimitBytes;
  topts.maxUnhandledBytes = opts.flowLimitBytes;
  transportImpl = std::make_unique<transport::Transport>(*ioImpl, topts);
  // Actors are run by enqueued tasks, never by a thread that joins the
  // arena, so no slot is reserved for masters. Handlers may block (a slow
  // endpoint, a sleep), so the arena allows a few more threads than cores.
  int threads = opts.arenaThreads > 0
                    ? opts.arenaThreads
                    : std::max(4, tbb::info::default_concurrency());
  parallelism = std::make_unique<tbb::global_control>(
      tbb::global_control::max_allowed_parallelism,
      std::max<size_t>(threads + 1,
                       tbb::global_control::active_value(
                           tbb::global_control::max_allowed_parallelism)));
  arenaImpl = std::make_unique<tbb::task_arena>(threads, 0);
  workGuard =
      std::make_unique<WorkGuard>(WorkGuard{asio::make_work_guard(*ioImpl)});
  ioLoopImpl = std::make_shared<IoLoop>(*ioImpl);
  ioThread = std::thread([loop = ioLoopImpl] { loop->run(); });
}

Status Runtime::start() {
  std::string where = opts.listenAddr;
  if (where.empty()) {
    if (privateDir().empty())
      return Status(ErrorCode::Internal, "cannot create a private directory");
    where = "unix:" + dir + "/proc.sock";
  }
  auto addr = transport::ChannelAddr::parse(where);
  if (!addr.ok())
    return addr.status();
  auto bound = transportImpl->listen(*addr, [this](transport::Message &&m) {
    routerImpl.deliver(std::move(m));
  });
  if (!bound.ok())
    return bound.status();
  listener = std::move(*bound);
  listenAddr = listener->addr().toString();
  sender = opts.procId + "@" + listenAddr;
  return Status::ok();
}

Runtime::~Runtime() {
  if (globalInstance.load() == this)
    globalInstance = nullptr;
  if (processInstance.load() == this)
    processInstance = nullptr;
  if (listener)
    listener->close();
  {
    std::lock_guard<std::mutex> guard(linksMu);
    for (auto &[addr, link] : links)
      link->close();
    links.clear();
  }
  // Let the posted closes run, then stop the io thread.
  runOnIo([] {});
  workGuard.reset();
  ioLoopImpl->stop();
  if (ioThread.joinable())
    ioThread.join();
  listener.reset();
  removeDir(dir);
}

const std::string &Runtime::privateDir() {
  std::lock_guard<std::mutex> guard(dirMu);
  if (dir.empty()) {
    // The process-wide runtimes are often never destroyed (an extension
    // module's, a worker leaving by exit()): their directory, socket
    // included, goes at exit all the same, and on SIGTERM/SIGINT/SIGHUP
    // (OwnedDirs.h).
    dir = makePrivateDir();
  }
  return dir;
}

void Runtime::removePrivateDir() {
  std::lock_guard<std::mutex> guard(dirMu);
  removeDir(dir);
  dir.clear();
}

bool Runtime::onIoThread() { return IoLoop::onIoThread(); }

std::shared_ptr<Poller> Runtime::poller() const { return ioLoopImpl; }

void Runtime::fatalCleanup() {
  killAllLocalProcs();
  if (Runtime *rt = globalInstance.load())
    removeDir(rt->dir);
}

void Runtime::runOnIo(std::function<void()> fn) {
  if (IoLoop::onIoThread())
    return fn();
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  asio::post(*ioImpl, [&] {
    fn();
    std::lock_guard<std::mutex> guard(mu);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; }))
    log::error("io thread did not respond within 10 s");
}

void Runtime::setGlobalOptions(RuntimeOptions options) {
  std::lock_guard<std::mutex> guard(globalMu);
  globalOptions = std::move(options);
}

Runtime &Runtime::ofProcess() {
  if (Runtime *rt = processInstance.load())
    return *rt;
  return global();
}

void Runtime::setProcessRuntime(Runtime *rt) { processInstance = rt; }

Runtime &Runtime::global() {
  static std::unique_ptr<Runtime> instance = [] {
    std::lock_guard<std::mutex> guard(globalMu);
    auto rt = std::make_unique<Runtime>(globalOptions);
    Status started = rt->start();
    if (!started.isOk()) {
      log::error("cannot start the runtime: ", started.toString());
      std::abort();
    }
    globalInstance = rt.get();
    return rt;
  }();
  return *instance;
}

Expected<std::shared_ptr<transport::Link>>
Runtime::link(const std::string &addr) {
  std::lock_guard<std::mutex> guard(linksMu);
  auto it = links.find(addr);
  if (it != links.end() && !it->second->isClosed())
    return it->second;
  auto parsed = transport::ChannelAddr::parse(addr);
  if (!parsed.ok())
    return parsed.status();
  auto link = transportImpl->connect(*parsed);
  links[addr] = link;
  return link;
}

uint64_t Runtime::nextSeq(const std::string &addr) {
  std::lock_guard<std::mutex> guard(seqMu);
  return ++seqs[addr];
}

uint64_t Runtime::peekSeq(const std::string &addr) {
  std::lock_guard<std::mutex> guard(seqMu);
  return seqs[addr] + 1;
}

} // namespace monarch

namespace monarch {

void Runtime::resetPeer(const std::string &addr) {
  {
    std::lock_guard<std::mutex> guard(seqMu);
    seqs.erase(addr);
  }
  std::shared_ptr<transport::Link> old;
  {
    std::lock_guard<std::mutex> guard(linksMu);
    auto it = links.find(addr);
    if (it != links.end()) {
      old = std::move(it->second);
      links.erase(it);
    }
  }
  if (old)
    old->close();
}

} // namespace monarch
