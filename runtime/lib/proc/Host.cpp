#include "monarch/runtime/proc/Host.h"

#include "monarch/runtime/proc/MeshState.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <asio.hpp>

#include <atomic>
#include <condition_variable>

namespace monarch {

Status meshErrorToStatus(const mesh::MeshError &error);

// In a worker, an actor spawning procs does so from the worker's own runtime:
// one io thread, one arena and one private directory per process.
Host thisHost() { return Host(Runtime::ofProcess()); }

namespace {
/// Readiness of the procs being spawned.
struct ReadyState {
  std::mutex mu;
  std::condition_variable cv;
  size_t ready = 0;
  std::string failure;
};
std::atomic<int> meshCounter{0};
} // namespace

Expected<ProcMesh> Host::spawnProcs(const Shape &shape,
                                    SpawnProcsOptions options) const {
  auto root = mesh::MeshView::root(shape);
  if (!root.ok())
    return meshErrorToStatus(root.error());
  size_t n = static_cast<size_t>(root->size());
  int serial = meshCounter.fetch_add(1);
  std::string name =
      options.name.empty() ? "procs" + std::to_string(serial) : options.name;
  if (options.transport != "unix" && options.transport != "tcp")
    return Status(ErrorCode::Invalid,
                  "transport must be unix or tcp, not " + options.transport);
  // Refused before anything forks: a mesh that does not fit on this host
  // starts none of its procs (the launcher checks each fork as well).
  if (!options.launcher)
    if (Status room = checkLocalProcRoom(static_cast<int64_t>(n));
        !room.isOk())
      return Status(room.code(), "spawning proc mesh '" + name + "' of " +
                                     std::to_string(n) +
                                     " procs: " + room.message());
  auto launcher =
      options.launcher
          ? options.launcher
          : std::make_shared<LocalProcLauncher>(rt.transport().io());
  std::string workerPath =
      options.workerPath.empty() ? locateWorkerBinary() : options.workerPath;

  auto state = std::make_shared<ProcMeshState>(rt, name, *root);
  state->slots.resize(n);
  auto ready = std::make_shared<ReadyState>();
  std::weak_ptr<ProcMeshState> weak = state;
  uint64_t readyPort =
      rt.router().openPort([weak, ready, n](transport::Message &&m) {
        auto st = weak.lock();
        if (!st || !m.envelope.has_ready() || m.envelope.ready().rank() >= n)
          return;
        {
          std::lock_guard<std::mutex> guard(st->mu);
          auto &slot = st->slots[m.envelope.ready().rank()];
          if (slot.ready)
            return;
          slot.addr = m.envelope.ready().addr();
          slot.ready = true;
        }
        std::lock_guard<std::mutex> guard(ready->mu);
        ++ready->ready;
        ready->cv.notify_all();
      });

  // Hang detection (Liveness.h): heartbeats arrive on a port of their own;
  // the monitor reports silent procs to the mesh state, which fails their
  // calls and raises the events.
  asio::io_context &io = rt.transport().io();
  if (options.liveness.enabled()) {
    state->liveness = std::make_shared<LivenessMonitor>(
        io, n, options.liveness,
        [weak](uint32_t rank, int64_t ms) {
          if (auto st = weak.lock())
            st->procUnresponsive(rank, ms);
        },
        [weak](uint32_t rank, int64_t ms) {
          if (auto st = weak.lock())
            st->procResponsive(rank, ms);
        });
    std::weak_ptr<LivenessMonitor> monitor = state->liveness;
    state->heartbeatPort =
        rt.router().openPort([monitor](transport::Message &&m) {
          if (!m.envelope.has_heartbeat())
            return;
          if (auto live = monitor.lock())
            live->heard(m.envelope.heartbeat().rank());
        });
  }

  Status launchError;
  for (uint32_t rank = 0; rank < n; ++rank) {
    ProcLaunchSpec spec;
    auto &b = spec.bootstrap;
    b.set_proc_id(name + "/" + std::to_string(rank));
    b.set_rank(rank);
    b.set_parent_addr(rt.addr());
    b.set_ready_port(readyPort);
    b.set_secret(rt.secret());
    if (options.transport == "tcp")
      b.set_listen_addr("tcp://" + options.tcpHost + ":0");
    else
      b.set_listen_addr("unix:" + rt.privateDir() + "/m" +
                        std::to_string(serial) + "-" + std::to_string(rank) +
                        ".sock");
    for (const auto &lib : options.actorLibraries)
      b.add_actor_libraries(lib);
    b.set_fanout(rt.fanout());
    if (state->liveness) {
      b.set_heartbeat_port(state->heartbeatPort);
      b.set_heartbeat_ms(
          static_cast<uint32_t>(options.liveness.interval.count()));
    }
    spec.workerPath = workerPath;
    spec.args = options.workerArgs;
    spec.env = options.workerEnv;
    spec.logPrefix = name + " rank " + std::to_string(rank);
    auto launched = launcher->launch(spec);
    if (!launched.ok()) {
      launchError = launched.status();
      break;
    }
    (*launched)->onExit([weak, ready, rank](const std::string &how) {
      auto st = weak.lock();
      if (!st)
        return;
      bool wasReady;
      {
        std::lock_guard<std::mutex> guard(st->mu);
        wasReady = st->slots[rank].ready;
      }
      if (wasReady) {
        st->procFailed(rank, how);
        return;
      }
      std::lock_guard<std::mutex> guard(ready->mu);
      if (ready->failure.empty())
        ready->failure =
            "rank " + std::to_string(rank) + " " + how + " before it was ready";
      ready->cv.notify_all();
    });
    std::lock_guard<std::mutex> guard(state->mu);
    state->slots[rank].process = std::move(*launched);
  }

  Status outcome = launchError;
  if (outcome.isOk()) {
    std::unique_lock<std::mutex> lock(ready->mu);
    bool done = ready->cv.wait_for(lock, options.readyTimeout, [&] {
      return ready->ready == n || !ready->failure.empty();
    });
    if (!ready->failure.empty())
      outcome = Status(ErrorCode::Closed,
                       "spawning proc mesh '" + name + "': " + ready->failure);
    else if (!done)
      outcome = Status(ErrorCode::Timeout,
                       "spawning proc mesh '" + name +
                           "': " + std::to_string(n - ready->ready) +
                           " procs not ready in time");
  }
  rt.router().closePort(readyPort);
  if (!outcome.isOk())
    return outcome; // the state's destructor ends the procs started so far

  for (uint32_t rank = 0; rank < n; ++rank) {
    rt.resetPeer(state->addrOf(rank));
    auto link = rt.link(state->addrOf(rank));
    if (!link.ok())
      return link.status();
    {
      std::lock_guard<std::mutex> guard(state->mu);
      state->slots[rank].link = *link;
    }
    // A closed connection means the proc is gone or unreachable. The exit
    // status, when there is one, arrives within moments and gives the better
    // reason; the timer makes sure a silent peer is failed all the same.
    (*link)->onClose([weak, rank, &io](const Status &why) {
      auto timer = std::make_shared<asio::steady_timer>(
          io, std::chrono::milliseconds(250));
      timer->async_wait([weak, rank, why, timer](asio::error_code) {
        if (auto st = weak.lock())
          st->procFailed(rank, "connection lost (" + why.message() + ")");
      });
    });
  }
  if (state->liveness)
    state->liveness->start();
  return ProcMesh(state, *root);
}

} // namespace monarch
