//===- Controller.cpp - Driving tensor workers from one process -----------===//

#include "monarch/tensor/Controller.h"

#include "monarch/runtime/Monarch.h"
#include "monarch/runtime/host/HostMesh.h"
#include "monarch/runtime/proc/ProcLauncher.h"
#include "monarch/runtime/util/Log.h"
#include "monarch/tensor/PortStore.h"
#include "monarch/tensor/TempDir.h"
#include "monarch/tensor/TensorWorker.h"

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <unistd.h>

namespace monarch::tensor {
namespace {

/// Events from the io thread (port, supervision) to next()'s caller.
class EventQueue {
public:
  void push(ControllerEvent event) {
    {
      std::lock_guard<std::mutex> guard(mu);
      events.push_back(std::move(event));
    }
    cv.notify_one();
  }
  std::optional<ControllerEvent> pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return !events.empty(); }))
      return std::nullopt;
    ControllerEvent e = std::move(events.front());
    events.pop_front();
    return e;
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  std::deque<ControllerEvent> events;
};

bool executable(const std::string &path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0;
}

std::string dirOf(const std::string &path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Expected<std::string> workerBinary(const std::string &configured) {
  if (!configured.empty()) {
    if (executable(configured))
      return configured;
    return Status(ErrorCode::NotFound, "tensor worker binary '" + configured +
                                           "' is not executable");
  }
  if (const char *env = std::getenv("MONARCH_TENSOR_WORKER")) {
    if (executable(env))
      return std::string(env);
    return Status(ErrorCode::NotFound, std::string("$MONARCH_TENSOR_WORKER (") +
                                           env + ") is not executable");
  }
  std::string beside = dirOf(currentExecutable()) + "/monarch-tensor-worker";
  if (executable(beside))
    return beside;
#ifdef MONARCH_BUILD_BIN_DIR
  std::string built =
      std::string(MONARCH_BUILD_BIN_DIR) + "/monarch-tensor-worker";
  if (executable(built))
    return built;
#endif
  return Status(ErrorCode::NotFound,
                "no monarch-tensor-worker found beside " + currentExecutable() +
                    " (build it, or set $MONARCH_TENSOR_WORKER)");
}

} // namespace

struct Controller::Impl {
  ControllerOptions options;
  std::shared_ptr<EventQueue> queue = std::make_shared<EventQueue>();
  std::unique_ptr<TempDir> storeDir;
  std::unique_ptr<StoreServer> storeServer;
  std::unique_ptr<Port> port;
  std::optional<ProcMesh> procs;
  std::optional<ActorMesh> workers;
};

Controller::Controller(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}

Controller::~Controller() { (void)stop(); }

int64_t Controller::size() const {
  int64_t n = 1;
  for (const auto &d : impl->options.shape)
    n *= d.second;
  return n;
}

const ControllerOptions &Controller::options() const { return impl->options; }

Expected<std::unique_ptr<Controller>>
Controller::start(ControllerOptions options) {
  if (options.shape.empty())
    return Status(ErrorCode::Invalid, "controller: the proc mesh has no dims");
  for (const auto &[name, size] : options.shape)
    if (size <= 0)
      return Status(ErrorCode::Invalid, "controller: dim '" + name +
                                            "' has size " +
                                            std::to_string(size));
  auto worker = workerBinary(options.workerPath);
  if (!worker.ok())
    return worker.status();

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  Runtime &rt = Runtime::global();
  if (options.hosts)
    impl->storeServer = std::make_unique<StoreServer>(rt);
  else
    impl->storeDir = std::make_unique<TempDir>("store");
  std::shared_ptr<EventQueue> queue = impl->queue;
  impl->port = std::make_unique<Port>(
      rt, [queue](proto::Value &&value, PayloadList &&payloads) {
        ControllerEvent e;
        try {
          e.worker = decodeValue<plan::WorkerEvent>(value, payloads);
        } catch (const DecodeError &err) {
          log::error("controller: bad worker event: ", err.what());
          return;
        }
        e.rank = e.worker.rank();
        queue->push(std::move(e));
      });

  SpawnProcsOptions spawn;
  spawn.name = "tensor_procs";
  spawn.workerPath = *worker;
  spawn.readyTimeout = options.timeout;
  Expected<ProcMesh> procs = Status(ErrorCode::Internal, "not spawned");
  if (options.hosts) {
    Shape hostDim = options.hosts->shape();
    if (options.shape.front() != hostDim.front())
      return Status(ErrorCode::Invalid,
                    "controller: the first dim is " + options.shape[0].first +
                        "=" + std::to_string(options.shape[0].second) +
                        ", the host mesh is " + hostDim[0].first + "=" +
                        std::to_string(hostDim[0].second));
    Shape perHost(options.shape.begin() + 1, options.shape.end());
    procs = options.hosts->spawnProcs(perHost, spawn);
  } else {
    procs = thisHost().spawnProcs(options.shape, spawn);
  }
  if (!procs.ok())
    return procs.status();
  // A dead worker is an event for the program, never the controller's end.
  auto onFailure = [queue](const SupervisionEvent &event) {
    ControllerEvent e;
    e.kind = ControllerEvent::Kind::ProcFailure;
    e.rank = event.rank;
    e.message = event.toString();
    queue->push(std::move(e));
    return true;
  };
  procs->supervise(onFailure);
  impl->procs = *procs;

  plan::WorkerConfig config;
  for (const auto &[name, size] : options.shape) {
    auto *d = config.add_root();
    d->set_name(name);
    d->set_size(size);
  }
  if (impl->storeServer) {
    config.set_store_addr(impl->storeServer->ref().addr());
    config.set_store_port(impl->storeServer->ref().port());
  } else {
    config.set_store_dir(impl->storeDir->path());
  }
  config.set_memory_cap_bytes(options.memoryCapBytes);
  config.set_timeout_ms(options.timeout.count());
  config.set_trace(options.trace);
  auto workers = procs->spawn("tensor_workers", kTensorWorkerClass,
                              impl->port->ref(), config);
  if (!workers.ok()) {
    (void)procs->stop();
    return workers.status();
  }
  workers->supervise([](const SupervisionEvent &) {
    return false; // the proc mesh's hook reports it
  });
  impl->workers = *workers;
  return std::unique_ptr<Controller>(new Controller(std::move(impl)));
}

Status Controller::declare(const plan::Program &program) {
  if (!impl->workers)
    return Status(ErrorCode::Invalid, "controller stopped");
  if (program.root_size() != static_cast<int>(impl->options.shape.size()))
    return Status(ErrorCode::Invalid,
                  "program's root mesh does not match the controller's");
  for (int i = 0; i < program.root_size(); ++i)
    if (program.root(i).name() != impl->options.shape[i].first ||
        program.root(i).size() != impl->options.shape[i].second)
      return Status(ErrorCode::Invalid,
                    "program's root mesh dim " + std::to_string(i) + " is " +
                        program.root(i).name() + "=" +
                        std::to_string(program.root(i).size()) +
                        ", the controller's is " +
                        impl->options.shape[i].first + "=" +
                        std::to_string(impl->options.shape[i].second));
  // Everything but the instructions (a whole plan's may be large); keep
  // in step with plan.proto's Program.
  plan::Program header;
  header.set_magic(program.magic());
  header.set_version(program.version());
  *header.mutable_root() = program.root();
  *header.mutable_meshes() = program.meshes();
  *header.mutable_streams() = program.streams();
  auto replies =
      impl->workers->call<Unit>("declare", header).get(impl->options.timeout);
  return replies.ok() ? Status::ok() : replies.status();
}

Status Controller::submit(const plan::InstructionBatch &batch) {
  if (!impl->workers)
    return Status(ErrorCode::Invalid, "controller stopped");
  Blob blob{transport::Buffer::fromString(batch.SerializeAsString())};
  return impl->workers->broadcast("submit", blob);
}

Status Controller::submit(const std::vector<plan::Instruction> &instructions) {
  plan::InstructionBatch batch;
  for (const auto &inst : instructions)
    *batch.add_instructions() = inst;
  return submit(batch);
}

std::optional<ControllerEvent>
Controller::next(std::chrono::milliseconds timeout) {
  return impl->queue->pop(timeout);
}

Status Controller::stop() {
  if (!impl->procs)
    return Status::ok(); // stopped already
  impl->workers.reset();
  Status s = impl->procs->stop();
  impl->procs.reset();
  return s;
}

std::vector<int> Controller::pids() const {
  return impl->procs ? impl->procs->pids() : std::vector<int>{};
}

std::optional<ProcMesh> Controller::procMesh() const { return impl->procs; }

} // namespace monarch::tensor
