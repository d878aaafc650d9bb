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
#include <map>
#include <set>
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

/// What the controller knows about its workers' health and the fetches they
/// owe, so that what needs a failed rank fails at once and nothing else
/// does. Entered from the user's thread (submit, stop) and the io thread
/// (worker events, supervision); one mutex, and events are queued under it
/// so that their order is the order things were decided in.
class Supervisor {
public:
  explicit Supervisor(std::shared_ptr<EventQueue> queue)
      : queue(std::move(queue)) {}

  void addMeshes(const plan::Program &program) {
    std::lock_guard<std::mutex> guard(mu);
    std::vector<std::pair<std::string, int64_t>> shape;
    for (const auto &d : program.root())
      shape.emplace_back(d.name(), d.size());
    if (auto root = mesh::MeshView::root(shape); root.ok())
      meshes.insert_or_assign(0, std::move(root).value());
    for (const auto &m : program.meshes())
      addMeshLocked(m);
  }

  /// Before `batch` is sent: answers the fetches of failed or unresponsive
  /// ranks now, and records the others as owed. Error when stopped.
  Status beforeSubmit(const plan::InstructionBatch &batch) {
    std::lock_guard<std::mutex> guard(mu);
    if (stopped)
      return Status(ErrorCode::Closed,
                    "the tensor mesh is stopped: nothing can run on it");
    for (const auto &inst : batch.instructions())
      observe(inst, /*topLevel=*/true);
    return Status::ok();
  }

  /// A worker event from the port, queued unless it is the late reply of a
  /// fetch already answered because its rank was unresponsive.
  void workerEvent(ControllerEvent event) {
    std::lock_guard<std::mutex> guard(mu);
    if (event.worker.has_fetch()) {
      Key key{event.worker.fetch().instruction(), event.worker.fetch().rank()};
      if (answered.erase(key))
        return;
      owed.erase(key);
    }
    queue->push(std::move(event));
  }

  /// A worker died: report it, then fail what it owed.
  void procFailed(int64_t rank, const std::string &message) {
    std::lock_guard<std::mutex> guard(mu);
    if (stopped || failed.count(rank))
      return;
    failed[rank] = message;
    unresponsive.erase(rank);
    ControllerEvent e;
    e.kind = ControllerEvent::Kind::ProcFailure;
    e.rank = rank;
    e.message = message;
    queue->push(std::move(e));
    for (auto it = owed.begin(); it != owed.end();)
      if (it->first.second == rank) {
        answer(it->first, it->second, message, rank);
        it = owed.erase(it);
      } else {
        ++it;
      }
    for (auto it = answered.begin(); it != answered.end();)
      it = it->second == rank ? answered.erase(it) : std::next(it);
  }

  void procUnresponsive(int64_t rank, int64_t silentMs,
                        const std::string &message) {
    std::lock_guard<std::mutex> guard(mu);
    if (stopped || failed.count(rank))
      return;
    unresponsive[rank] = message;
    ControllerEvent e;
    e.kind = ControllerEvent::Kind::ProcUnresponsive;
    e.rank = rank;
    e.message = message;
    e.silentMs = silentMs;
    queue->push(std::move(e));
    for (auto it = owed.begin(); it != owed.end();)
      if (it->first.second == rank) {
        answer(it->first, it->second, message, rank);
        answered.insert(it->first); // its real reply, if it comes, is late
        it = owed.erase(it);
      } else {
        ++it;
      }
  }

  void procResponsive(int64_t rank, int64_t silentMs,
                      const std::string &message) {
    std::lock_guard<std::mutex> guard(mu);
    if (stopped || !unresponsive.erase(rank))
      return;
    ControllerEvent e;
    e.kind = ControllerEvent::Kind::ProcResponsive;
    e.rank = rank;
    e.message = message;
    e.silentMs = silentMs;
    queue->push(std::move(e));
  }

  /// stop(): the fetches still owed fail, and nothing is accepted after.
  void stop(const std::string &why) {
    std::lock_guard<std::mutex> guard(mu);
    if (stopped)
      return;
    stopped = true;
    for (const auto &[key, location] : owed)
      answer(key, location, why, -1);
    owed.clear();
    answered.clear();
  }

  bool isStopped() const {
    std::lock_guard<std::mutex> guard(mu);
    return stopped;
  }

  /// The workers' actor mesh: read by the io thread's supervision hook (to
  /// tell live workers of a death), reset by stop().
  void setWorkers(std::optional<ActorMesh> mesh) {
    std::lock_guard<std::mutex> guard(workersMu);
    workerMesh = std::move(mesh);
  }
  std::optional<ActorMesh> workers() const {
    std::lock_guard<std::mutex> guard(workersMu);
    return workerMesh;
  }
  std::map<int64_t, std::string> failedRanks() const {
    std::lock_guard<std::mutex> guard(mu);
    return failed;
  }

private:
  using Key = std::pair<int64_t, int64_t>; ///< (fetch instruction, rank)

  void addMeshLocked(const plan::Mesh &m) {
    std::vector<mesh::Dim> dims;
    for (const auto &d : m.dims())
      dims.push_back({d.name(), d.size(), d.stride()});
    if (auto view = mesh::MeshView::create(m.offset(), dims); view.ok())
      meshes.insert_or_assign(m.id(), std::move(view).value());
  }

  /// The ranks of mesh `id` (none when unknown: the workers report that).
  std::vector<int64_t> ranksOf(int64_t id) const {
    auto it = meshes.find(id);
    return it == meshes.end() ? std::vector<int64_t>{} : it->second.ranks();
  }

  void observe(const plan::Instruction &inst, bool topLevel) {
    switch (inst.kind_case()) {
    case plan::Instruction::kCreateMesh:
      addMeshLocked(inst.create_mesh().mesh());
      break;
    case plan::Instruction::kDefineRecording: {
      auto &fetches = recordingFetches[inst.define_recording().recording().id()];
      for (const auto &b : inst.define_recording().recording().body())
        if (b.kind_case() == plan::Instruction::kFetch)
          fetches.push_back(b);
      break;
    }
    case plan::Instruction::kCallRecording:
      // Fetches inside recordings are answered per call but not tracked as
      // owed (each call repeats their ids): only failed ranks' are answered.
      for (const auto &f : recordingFetches[inst.call_recording().recording()])
        for (int64_t r : ranksOf(f.mesh()))
          if (auto it = failed.find(r); it != failed.end())
            answer({f.id(), r}, f.location(), it->second, r);
      break;
    case plan::Instruction::kFetch:
      for (int64_t r : ranksOf(inst.mesh())) {
        Key key{inst.id(), r};
        if (auto it = failed.find(r); it != failed.end()) {
          answer(key, inst.location(), it->second, r);
        } else if (auto u = unresponsive.find(r); u != unresponsive.end()) {
          answer(key, inst.location(), u->second, r);
          answered.insert(key);
        } else if (topLevel) {
          owed.emplace(key, inst.location());
        }
      }
      break;
    default:
      break;
    }
  }

  /// Queues the reply a fetch gets from a rank that cannot answer.
  void answer(const Key &key, const std::string &location,
              const std::string &message, int64_t failedRank) {
    ControllerEvent e;
    e.rank = key.second;
    e.worker.set_rank(key.second);
    auto *reply = e.worker.mutable_fetch();
    reply->set_instruction(key.first);
    reply->set_rank(key.second);
    auto *error = reply->mutable_error();
    error->set_instruction(key.first);
    error->set_rank(key.second);
    error->set_message(message);
    error->set_location(location);
    if (failedRank >= 0) {
      error->set_supervision(true);
      error->set_failed_rank(failedRank);
    }
    queue->push(std::move(e));
  }

  std::shared_ptr<EventQueue> queue;
  mutable std::mutex workersMu;
  std::optional<ActorMesh> workerMesh;
  mutable std::mutex mu;
  bool stopped = false;
  std::map<int64_t, std::string> failed;       ///< rank -> message
  std::map<int64_t, std::string> unresponsive; ///< rank -> message
  std::map<int64_t, mesh::MeshView> meshes;
  std::map<int64_t, std::vector<plan::Instruction>> recordingFetches;
  std::map<Key, std::string> owed; ///< fetch replies due, with locations
  /// Answered for an unresponsive rank: its late real reply is dropped.
  std::set<Key> answered;
};

struct Controller::Impl {
  ControllerOptions options;
  std::shared_ptr<EventQueue> queue = std::make_shared<EventQueue>();
  std::shared_ptr<Supervisor> supervisor =
      std::make_shared<Supervisor>(queue);
  std::unique_ptr<TempDir> storeDir;
  std::unique_ptr<StoreServer> storeServer;
  std::unique_ptr<Port> port;
  std::optional<ProcMesh> procs;
  std::optional<ActorMesh> liveWorkers() const {
    return supervisor->workers();
  }
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
    // Inside the runtime's private directory: one directory per controller
    // process, removed on every exit path (util/OwnedDirs.h).
    impl->storeDir = std::make_unique<TempDir>("store", rt.privateDir());
  std::shared_ptr<Supervisor> supervisor = impl->supervisor;
  impl->port = std::make_unique<Port>(
      rt, [supervisor](proto::Value &&value, PayloadList &&payloads) {
        ControllerEvent e;
        try {
          e.worker = decodeValue<plan::WorkerEvent>(value, payloads);
        } catch (const DecodeError &err) {
          log::error("controller: bad worker event: ", err.what());
          return;
        }
        e.rank = e.worker.rank();
        supervisor->workerEvent(std::move(e));
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
  // A dead (or silent) worker is an event for the program, never the
  // controller's end; the live workers are told of a death so that their
  // collectives with it fail at once. Runs on the io thread.
  auto onEvent = [supervisor](const SupervisionEvent &event) {
    std::string message = event.toString();
    switch (event.kind) {
    case SupervisionKind::Unresponsive:
      supervisor->procUnresponsive(event.rank, event.silentMs, message);
      break;
    case SupervisionKind::Responsive:
      supervisor->procResponsive(event.rank, event.silentMs, message);
      break;
    case SupervisionKind::Failed:
      supervisor->procFailed(event.rank, message);
      if (auto workers = supervisor->workers())
        if (Status told = workers->broadcastLive("rank_failed", event.rank,
                                                 message);
            !told.isOk() && told.code() != ErrorCode::Closed)
          log::error("controller: cannot tell the workers that rank ",
                     event.rank, " failed: ", told.toString());
      break;
    }
    return true;
  };
  procs->supervise(onEvent);
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
  if (options.cudaGraphs)
    config.set_cuda_graphs(*options.cudaGraphs);
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
  impl->supervisor->setWorkers(*workers);
  return std::unique_ptr<Controller>(new Controller(std::move(impl)));
}

Status Controller::declare(const plan::Program &program) {
  auto workers = impl->liveWorkers();
  if (!workers || impl->supervisor->isStopped())
    return Status(ErrorCode::Closed,
                  "the tensor mesh is stopped: nothing can run on it");
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
  impl->supervisor->addMeshes(header);
  // Live workers only: a call to a failed rank would fail the declare.
  if (impl->supervisor->failedRanks().empty()) {
    auto replies =
        workers->call<Unit>("declare", header).get(impl->options.timeout);
    return replies.ok() ? Status::ok() : replies.status();
  }
  return workers->broadcastLive("declare", header);
}

Status Controller::submit(const plan::InstructionBatch &batch) {
  auto workers = impl->liveWorkers();
  if (!workers)
    return Status(ErrorCode::Closed,
                  "the tensor mesh is stopped: nothing can run on it");
  // Fetches from failed ranks are answered (and the others recorded as
  // owed) before anything is sent, so a reply cannot overtake its record.
  if (Status s = impl->supervisor->beforeSubmit(batch); !s.isOk())
    return s;
  Blob blob{transport::Buffer::fromString(batch.SerializeAsString())};
  return workers->broadcastLive("submit", blob);
}

Status Controller::submit(const std::vector<plan::Instruction> &instructions) {
  plan::InstructionBatch batch;
  for (const auto &inst : instructions)
    *batch.add_instructions() = inst;
  return submit(batch);
}

std::optional<ControllerEvent>
Controller::next(std::chrono::milliseconds timeout) {
  // Stopped, nothing more can come: take what is queued, never wait.
  if (impl->supervisor->isStopped())
    return impl->queue->pop(std::chrono::milliseconds(0));
  return impl->queue->pop(timeout);
}

std::map<int64_t, std::string> Controller::failedRanks() const {
  return impl->supervisor->failedRanks();
}

bool Controller::stopped() const { return impl->supervisor->isStopped(); }

Status Controller::stop() {
  impl->supervisor->stop("the tensor mesh was stopped before this fetch "
                         "was answered");
  if (!impl->procs)
    return Status::ok(); // stopped already
  impl->supervisor->setWorkers(std::nullopt);
  Status s = impl->procs->stop();
  impl->procs.reset();
  return s;
}

std::vector<int> Controller::pids() const {
  return impl->procs ? impl->procs->pids() : std::vector<int>{};
}

std::optional<ProcMesh> Controller::procMesh() const { return impl->procs; }

} // namespace monarch::tensor
