//===- TensorWorker.cpp - The tensor-worker actor -------------------------===//

#include "monarch/tensor/TensorWorker.h"

#include "RemoteActorBridge.h"

#include "monarch/runtime/actor/Actor.h"
#include "monarch/runtime/host/HostAddresses.h"
#include "monarch/runtime/proc/Port.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"
#include "monarch/runtime/util/OnOff.h"
#include "monarch/tensor/Executor.h"
#include "monarch/tensor/Functions.h"
#include "monarch/tensor/PortStore.h"

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <sched.h>
#include <stdexcept>
#include <thread>

namespace monarch::tensor {
namespace {

/// Workers on one host: the ranks of a root mesh without its "hosts" dim
/// (a host mesh's; host-major, so a rank's local index is rank % this).
int64_t ranksPerHost(const std::vector<std::pair<std::string, int64_t>> &root) {
  int64_t ranks = 1;
  for (const auto &d : root)
    if (d.first != "hosts")
      ranks *= std::max<int64_t>(d.second, 1);
  return ranks;
}

int64_t hostCores() {
  return std::max(1u, std::thread::hardware_concurrency());
}

/// The cores of this host each of its workers gets (at least one).
int64_t coreShare(const std::vector<std::pair<std::string, int64_t>> &root) {
  return std::max<int64_t>(1, hostCores() / ranksPerHost(root));
}

/// The workers of a host share its cores: unless OMP_NUM_THREADS says
/// otherwise, each takes an equal share (as torchrun does), instead of every
/// process running one ATen thread per core.
int intraOpShare(const std::vector<std::pair<std::string, int64_t>> &root) {
  if (std::getenv("OMP_NUM_THREADS"))
    return 0;
  return static_cast<int>(coreShare(root));
}

/// MONARCH_BIND_CORES=1: pins every thread of this process to the rank's
/// contiguous share of the host's cores, so workers do not migrate onto each
/// other's cores (steadier step times on a shared host). Best effort.
void bindToCoreShare(int64_t rank,
                     const std::vector<std::pair<std::string, int64_t>> &root) {
  int64_t cores = hostCores();
  int64_t share = coreShare(root);
  rank %= ranksPerHost(root);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int64_t c = 0; c < share; ++c)
    CPU_SET(static_cast<int>((rank * share + c) % cores), &set);
  // Threads started before this point (the runtime's) keep their mask unless
  // set one by one; later ones inherit the caller's.
  if (DIR *tasks = ::opendir("/proc/self/task")) {
    while (dirent *e = ::readdir(tasks))
      if (e->d_name[0] != '.')
        ::sched_setaffinity(static_cast<pid_t>(std::atoi(e->d_name)),
                            sizeof(set), &set);
    ::closedir(tasks);
  }
}

class TensorWorker : public Actor {
public:
  TensorWorker(proto::PortRef controller, plan::WorkerConfig config)
      : controller(std::move(controller)) {
    ExecutorOptions options;
    options.rank = context().rank;
    for (const auto &d : config.root())
      options.rootShape.emplace_back(d.name(), d.size());
    options.timeout = std::chrono::milliseconds(
        config.timeout_ms() > 0 ? config.timeout_ms() : 60000);
    options.memoryCapBytes = config.memory_cap_bytes();
    options.intraOpThreads = intraOpShare(options.rootShape);
    options.cudaGraphs = cudaGraphsSetting(config);
    if (const char *bind = std::getenv("MONARCH_BIND_CORES");
        bind && std::string(bind) == "1")
      bindToCoreShare(context().rank, options.rootShape);
    // rref: the actors of this process (a Python tensor worker), else
    // those in processes of their own, reached through the call's route.
    options.actors = processActorBridge();
    if (!options.actors)
      options.actors =
          std::make_shared<RemoteActorBridge>(options.rank, options.timeout);
    options.health = std::make_shared<PeerHealth>();
    std::shared_ptr<Store> store;
    if (!config.store_addr().empty()) {
      proto::PortRef server;
      server.set_addr(config.store_addr());
      server.set_port(config.store_port());
      store = std::make_shared<PortStore>(server);
    } else if (!config.store_dir().empty()) {
      store = std::make_shared<FileStore>(config.store_dir());
    }
    if (store) {
      GlooOptions gloo;
      gloo.timeout = options.timeout;
      gloo.health = options.health;
      // Workers on TCP (other hosts) publish their own address for Gloo's
      // connections; Unix-socket workers are local and keep loopback.
      std::string self = host::tcpHostOf(Runtime::ofProcess().addr());
      if (!self.empty())
        gloo.hostname = self;
      // Gloo; to_mesh's small control all-gathers among workers of one
      // host through shared memory.
      options.collectives = makeHostLocalBackend(makeGlooBackend(store, gloo),
                                                 store, options.timeout);
      // CUDA tensors go through NCCL when this build has it and a GPU
      // exists (through Gloo on host copies where workers share a GPU); it
      // rendezvouses through the same store under its own key prefixes.
      if (ncclAvailable())
        options.cudaCollectives =
            makeCudaBackend(store, options.collectives, options.timeout);
    }
    int64_t rank = options.rank;
    auto report = [this, rank](plan::WorkerEvent event) {
      event.set_rank(rank);
      send(event);
    };
    ExecutorCallbacks callbacks;
    callbacks.onFailure = [report](const plan::Failure &f) {
      plan::WorkerEvent e;
      *e.mutable_failure() = f;
      report(std::move(e));
    };
    callbacks.onFetch = [report](const plan::FetchReply &r) {
      plan::WorkerEvent e;
      *e.mutable_fetch() = r;
      report(std::move(e));
    };
    callbacks.onDebug = [rank](const std::string &line) {
      log::debug("rank ", rank, ": ", line);
    };
    callbacks.onStatus = [report](int64_t id) {
      plan::WorkerEvent e;
      e.set_status(id);
      report(std::move(e));
    };
    if (config.trace())
      callbacks.onTrace = [report](const plan::TraceEvent &t) {
        plan::WorkerEvent e;
        *e.mutable_trace() = t;
        report(std::move(e));
      };
    executor =
        std::make_unique<Executor>(std::move(options), std::move(callbacks));
  }

  Unit declare(plan::Program program) {
    if (Status s = executor->declare(program); !s.isOk())
      throw std::runtime_error(s.message());
    return {};
  }

  /// Broadcast by the controller when a worker's process failed: the
  /// collectives that need it fail at once (Executor::rankFailed).
  void rankFailed(int64_t rank, std::string reason) {
    log::debug("tensor worker ", context().rank, ": rank ", rank,
               " failed: ", reason);
    executor->rankFailed(rank, reason);
  }

  void submit(Blob batchBytes) {
    plan::InstructionBatch batch;
    if (!batch.ParseFromArray(batchBytes.buffer.data(),
                              static_cast<int>(batchBytes.buffer.size())))
      throw std::runtime_error("tensor worker: corrupted instruction batch");
    for (const auto &inst : batch.instructions())
      executor->submit(inst);
  }

private:
  void send(const plan::WorkerEvent &event) {
    proto::Value value;
    PayloadList payloads;
    encodeValue(event, value, payloads);
    // The executor runs its callbacks one at a time (Executor.h), so events
    // reach the link, and the controller, in the order they happened.
    if (Status s =
            sendToPort(controller, std::move(value), std::move(payloads));
        !s.isOk())
      log::error("tensor worker: cannot reach the controller: ", s.message());
  }

  proto::PortRef controller;
  std::unique_ptr<Executor> executor;
};

} // namespace

bool cudaGraphsSetting(const plan::WorkerConfig &config) {
  if (config.has_cuda_graphs())
    return config.cuda_graphs();
  return onOffFromEnv("MONARCH_CUDA_GRAPHS", true, "CUDA graphs stay on");
}

void registerTensorWorker() {
  static const bool registered =
      ActorClass<TensorWorker>(kTensorWorkerClass)
          .constructor<proto::PortRef, plan::WorkerConfig>()
          .endpoint("declare", &TensorWorker::declare)
          .endpoint("submit", &TensorWorker::submit)
          .endpoint("rank_failed", &TensorWorker::rankFailed)
          .system()
          .install();
  (void)registered;
}

} // namespace monarch::tensor
