//===- Actors.cpp - monarch._actors: Python actors on the C++ runtime -----===//
//
// One extension, two roles (docs/python.md, "Actors"):
//
//  * In the controller it drives the actor runtime (MonarchRuntime only; no
//    tensor engine): spawn_procs() starts a proc mesh whose workers are
//    Python processes (`python3 .../monarch/_src/bootstrap.py`, through a
//    launcher script since the local launcher execs a path without arguments),
//    Procs spawns actor meshes of the generic C++ class "monarch.PythonActor",
//    and Actors sends the adverbs. Every value crosses as a list of raw frames:
//    frame 0 is a pickle, the others its out-of-band buffers (pickle protocol
//    5), each one Blob payload on the wire.
//
//  * In a worker, importing the module registers "monarch.PythonActor" and
//    run_worker() serves (monarch::runWorker with the GIL released). The
//    actor's constructor and its endpoint "call" run on the actor's own
//    thread (the class is ownThread(): runtime/actor/ActorCell.h) and call
//    monarch._src.actor.worker.construct / invoke, which unpickle the class,
//    the arguments, run the Python method and pickle the result; its
//    endpoint "where" answers the proc's address.
//
//  * Meshes passed between processes: attach_procs() and
//    Procs.attach_actors() make handles on procs and actor meshes another
//    process spawned (references; docs/python.md, "Meshes as values").
//
// Blocking calls release the GIL; no callback ever takes the GIL on the io
// thread (await is served from a Python thread).
//
//===----------------------------------------------------------------------===//

#include "Frames.h"

#include "monarch/runtime/Monarch.h"
#include "monarch/runtime/host/HostMesh.h"
#include "monarch/runtime/proc/AttachedProcs.h"
#include "monarch/runtime/proc/MeshState.h"
#include "monarch/runtime/proc/Port.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/proc/Worker.h"
#include "monarch/runtime/util/Log.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace py = pybind11;
using monarch::Blob;
using monarch::Buffer;

namespace {

using monarch::python::Frame;
using monarch::python::Frames;
using monarch::python::fromPy;
using monarch::python::toPy;

py::tuple errorTuple(const monarch::Status &status) {
  return py::make_tuple("err", monarch::errorCodeName(status.code()),
                        status.message());
}

// -- Supervision events recorded for Python ----------------------------------

struct EventLog {
  std::mutex mu;
  std::vector<monarch::SupervisionEvent> events;
};

/// Supervision events waiting for this process's Python dispatcher thread
/// (monarch._src.actor.supervision), which runs the owner's __supervise__: the
/// runtime's hooks run on the io thread and may neither block nor take the GIL,
/// so they only queue. kind is "runtime" (a proc died or an actor stopped) or
/// "escalated" (an owning actor below did not handle an event).
struct QueuedEvent {
  std::string procs;
  std::string kind;
  monarch::SupervisionEvent event;
};

class SupervisionQueue {
public:
  static SupervisionQueue &instance() {
    static SupervisionQueue queue;
    return queue;
  }
  void push(QueuedEvent event) {
    {
      std::lock_guard<std::mutex> guard(mu);
      events.push_back(std::move(event));
    }
    cv.notify_all();
  }
  std::optional<QueuedEvent> pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return !events.empty(); }))
      return std::nullopt;
    QueuedEvent out = std::move(events.front());
    events.pop_front();
    return out;
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  std::deque<QueuedEvent> events;
};

// -- Futures -----------------------------------------------------------------

/// The reply of call(): ("ok", [frames per rank in the C++ view's order]) or
/// ("err", code, message); None while pending after the timeout.
class MeshFuture {
public:
  explicit MeshFuture(monarch::Future<monarch::ValueMesh<Frames>> f)
      : future(std::move(f)) {}
  py::object get(int64_t timeoutMs) {
    std::optional<monarch::Expected<monarch::ValueMesh<Frames>>> out;
    {
      py::gil_scoped_release release;
      auto r = future.get(
          std::chrono::milliseconds(std::max<int64_t>(timeoutMs, 0)));
      if (r.ok() || future.ready())
        out.emplace(std::move(r));
    }
    if (!out)
      return py::none();
    if (!out->ok())
      return errorTuple(out->status());
    py::list values;
    for (const auto &v : out->value())
      values.append(toPy(v));
    return py::make_tuple("ok", values);
  }
  bool ready() const { return future.ready(); }

private:
  monarch::Future<monarch::ValueMesh<Frames>> future;
};

/// One rank's reply: ("ok", frames) or ("err", code, message); None: pending.
class OneFuture {
public:
  explicit OneFuture(monarch::Future<Frames> f) : future(std::move(f)) {}
  py::object get(int64_t timeoutMs) {
    std::optional<monarch::Expected<Frames>> out;
    {
      py::gil_scoped_release release;
      auto r = future.get(
          std::chrono::milliseconds(std::max<int64_t>(timeoutMs, 0)));
      if (r.ok() || future.ready())
        out.emplace(std::move(r));
    }
    if (!out)
      return py::none();
    if (!out->ok())
      return errorTuple(out->status());
    return py::make_tuple("ok", toPy(out->value()));
  }
  bool ready() const { return future.ready(); }

private:
  monarch::Future<Frames> future;
};

// -- Actor meshes (controller) -----------------------------------------------

std::vector<std::pair<std::string, int64_t>>
shapeOf(const monarch::mesh::MeshView &view) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto &d : view.dims())
    out.emplace_back(d.name, d.size);
  return out;
}

/// `mesh` sliced along `dim`; Python's ValueError for a bad slice.
template <typename Mesh>
Mesh sliced(const Mesh &mesh, const std::string &dim, int64_t start,
            int64_t stop, int64_t step) {
  auto r = mesh.slice(dim, monarch::mesh::Range{start, stop, step});
  if (!r.ok())
    throw py::value_error(r.status().message());
  return std::move(*r);
}

class PyActors {
public:
  explicit PyActors(monarch::ActorMesh mesh) : mesh(std::move(mesh)) {}

  std::string name() const { return mesh.name(); }
  std::vector<std::pair<std::string, int64_t>> shape() const {
    return shapeOf(mesh.view());
  }
  /// Positions in the spawned actor mesh (its root view is 0..n-1).
  std::vector<int64_t> ranks() const { return mesh.view().ranks(); }

  PyActors slice(const std::string &dim, int64_t start, int64_t stop,
                 int64_t step) const {
    return PyActors(sliced(mesh, dim, start, stop, step));
  }

  MeshFuture call(const std::string &method, const py::sequence &frames,
                  int64_t flags) const {
    Frames args = fromPy(frames);
    py::gil_scoped_release release;
    return MeshFuture(mesh.call<Frames>("call", method, args, flags));
  }
  OneFuture callOne(const std::string &method, const py::sequence &frames,
                    int64_t flags) const {
    Frames args = fromPy(frames);
    py::gil_scoped_release release;
    return OneFuture(mesh.callOne<Frames>("call", method, args, flags));
  }
  OneFuture choose(const std::string &method, const py::sequence &frames,
                   int64_t flags) const {
    Frames args = fromPy(frames);
    py::gil_scoped_release release;
    return OneFuture(mesh.choose<Frames>("call", method, args, flags));
  }
  std::vector<OneFuture> stream(const std::string &method,
                                const py::sequence &frames,
                                int64_t flags) const {
    Frames args = fromPy(frames);
    std::vector<OneFuture> out;
    {
      py::gil_scoped_release release;
      for (auto &f : mesh.stream<Frames>("call", method, args, flags))
        out.emplace_back(std::move(f));
    }
    return out;
  }
  /// The listen address of each actor's proc, in rank order (the "where"
  /// endpoint of monarch.PythonActor); what a reference to the mesh that
  /// travels to another process needs.
  std::vector<std::string> addrs(int64_t timeoutMs) const {
    std::optional<monarch::Expected<monarch::ValueMesh<std::string>>> r;
    {
      py::gil_scoped_release release;
      r.emplace(mesh.call<std::string>("where").get(
          std::chrono::milliseconds(std::max<int64_t>(timeoutMs, 0))));
    }
    if (!r->ok())
      throw std::runtime_error("asking the procs of '" + mesh.name() +
                               "' where they listen: " + r->status().message());
    std::vector<std::string> out;
    for (const auto &a : r->value())
      out.push_back(a);
    return out;
  }

  void broadcast(const std::string &method, const py::sequence &frames,
                 int64_t flags) const {
    Frames args = fromPy(frames);
    monarch::Status status;
    {
      py::gil_scoped_release release;
      status = mesh.broadcast("call", method, args, flags);
    }
    if (!status.isOk())
      throw std::runtime_error(status.toString());
  }

private:
  monarch::ActorMesh mesh;
};

// -- Proc meshes (controller) ------------------------------------------------

/// Set by enable_liveness_events(): queue hang-detection events with kinds
/// "unresponsive" / "responsive" (runtime/proc/Liveness.h). Until a frontend
/// asks, an unresponsive proc is queued as a "runtime" failure and its
/// return only logged, since older dispatchers treat every event as one.
std::atomic<bool> livenessEvents{false};

/// Records an event and queues it for the Python dispatcher under `key`.
monarch::SupervisionHook queueingHook(std::shared_ptr<EventLog> log,
                                      std::string key) {
  return [log, key](const monarch::SupervisionEvent &event) {
    bool liveness = livenessEvents.load();
    if (event.kind == monarch::SupervisionKind::Responsive && !liveness)
      return true; // the runtime logged it
    {
      std::lock_guard<std::mutex> guard(log->mu);
      log->events.push_back(event);
    }
    const char *kind = "runtime";
    if (liveness && event.kind == monarch::SupervisionKind::Unresponsive)
      kind = "unresponsive";
    else if (event.kind == monarch::SupervisionKind::Responsive)
      kind = "responsive";
    SupervisionQueue::instance().push({key, kind, event});
    return true;
  };
}

/// The port on which owning actors spawned on procs `key` escalate the events
/// they did not handle, as [mesh, rank, reason].
std::shared_ptr<monarch::Port> escalationPort(std::string key) {
  return std::make_shared<monarch::Port>(
      monarch::Runtime::ofProcess(),
      [key](monarch::proto::Value &&value, monarch::PayloadList &&payloads) {
        std::vector<std::string> fields;
        try {
          fields =
              monarch::decodeValue<std::vector<std::string>>(value, payloads);
        } catch (const std::exception &) {
          return;
        }
        if (fields.size() != 3)
          return;
        int64_t rank = -1;
        try {
          rank = std::stoll(fields[1]);
        } catch (const std::exception &) {
        }
        SupervisionQueue::instance().push(
            {key, "escalated", {fields[0], rank, fields[2]}});
      });
}

class PyProcs {
public:
  /// `hookActors`: the proc mesh's own hook belongs to someone else (the
  /// tensor controller), so each spawned actor mesh gets the queueing hook.
  PyProcs(monarch::ProcMesh mesh, std::shared_ptr<EventLog> log,
          std::shared_ptr<monarch::Port> port, std::string key, bool hookActors,
          std::shared_ptr<monarch::ProcMeshState> attached = nullptr)
      : mesh(std::move(mesh)), log(std::move(log)), port(std::move(port)),
        key(std::move(key)), hookActors(hookActors),
        attached(std::move(attached)) {}

  std::string name() const { return mesh.name(); }
  std::vector<std::pair<std::string, int64_t>> shape() const {
    return shapeOf(mesh.view());
  }
  std::vector<int64_t> ranks() const { return mesh.view().ranks(); }

  PyProcs slice(const std::string &dim, int64_t start, int64_t stop,
                int64_t step) const {
    return PyProcs(sliced(mesh, dim, start, stop, step), log, port, key,
                   hookActors, attached);
  }

  /// On procs attached from a reference (attach_procs): the actor mesh
  /// `name` that another process spawned on the procs `procRanks` (one actor
  /// each, the actor mesh shaped `shape`). Calls reach the actors directly;
  /// their failures stay their owner's to handle (this handle only sees them
  /// as errors of its calls).
  PyActors attachActors(
      const std::string &name, const std::vector<int64_t> &procRanks,
      const std::vector<std::pair<std::string, int64_t>> &shape) const {
    if (!attached)
      throw std::runtime_error(
          "attach_actors needs procs made by attach_procs");
    auto root = monarch::mesh::MeshView::root(shape);
    if (!root.ok())
      throw py::value_error(root.error().message);
    std::vector<uint32_t> ranks;
    for (int64_t r : procRanks) {
      if (r < 0)
        throw py::value_error("attach_actors: no proc rank " +
                              std::to_string(r));
      ranks.push_back(static_cast<uint32_t>(r));
    }
    auto made = monarch::attachActorMesh(attached, name, ranks, *root);
    if (!made.ok())
      throw py::value_error(made.status().message());
    return PyActors(std::move(made.value()));
  }

  /// Spawns "monarch.PythonActor" on every proc of the view.
  PyActors spawn(const std::string &name, const py::sequence &frames) const {
    Frames args = fromPy(frames);
    std::optional<monarch::Expected<monarch::ActorMesh>> r;
    {
      py::gil_scoped_release release;
      r.emplace(mesh.spawn(name, "monarch.PythonActor", args));
    }
    if (!r->ok())
      throw std::runtime_error(r->status().message());
    if (hookActors)
      r->value().supervise(queueingHook(log, key));
    return PyActors(std::move(r->value()));
  }

  std::vector<int> pids() const { return mesh.pids(); }

  /// Supervision events seen so far: [(mesh, rank, reason)], oldest first.
  std::vector<std::tuple<std::string, int64_t, std::string>> events() const {
    std::lock_guard<std::mutex> guard(log->mu);
    std::vector<std::tuple<std::string, int64_t, std::string>> out;
    for (const auto &e : log->events)
      out.emplace_back(e.mesh, e.rank, e.reason);
    return out;
  }

  /// (addr, port) of the port on which owning actors spawned on these procs
  /// escalate the supervision events they did not handle.
  std::pair<std::string, int64_t> supervisionPort() const {
    auto ref = port->ref();
    return {ref.addr(), static_cast<int64_t>(ref.port())};
  }

  void stop() const {
    monarch::Status status;
    {
      py::gil_scoped_release release;
      status = mesh.stop();
    }
    if (!status.isOk())
      throw std::runtime_error(status.toString());
  }

private:
  monarch::ProcMesh mesh;
  std::shared_ptr<EventLog> log;
  std::shared_ptr<monarch::Port> port;
  std::string key;
  bool hookActors;
  /// Set on procs attached from a reference (the spawner holds the procs).
  std::shared_ptr<monarch::ProcMeshState> attached;
};

/// A proc mesh that another process spawned, reached at `addrs` (one per
/// rank of its root, row-major `shape`): what a ProcMesh or ActorMesh
/// passed to an actor (or returned from one) becomes in the receiving
/// process. Casts, slices and spawns go straight to the procs, as from the
/// spawner's handle; stop() only retires this handle (the spawner owns the
/// procs); a lost connection fails the rank here. Events are queued under
/// `key` (the Python side decides whose they are).
PyProcs attachProcs(const std::string &name,
                    const std::vector<std::pair<std::string, int64_t>> &shape,
                    const std::vector<std::string> &addrs,
                    const std::string &key) {
  auto root = monarch::mesh::MeshView::root(shape);
  if (!root.ok())
    throw py::value_error(root.error().message);
  if (static_cast<size_t>(root->size()) != addrs.size())
    throw py::value_error("attach_procs: " + std::to_string(addrs.size()) +
                          " addresses for a mesh of " +
                          std::to_string(root->size()));
  auto log = std::make_shared<EventLog>();
  std::optional<monarch::Expected<std::shared_ptr<monarch::ProcMeshState>>>
      attached;
  {
    py::gil_scoped_release release;
    attached.emplace(monarch::attachProcMesh(monarch::Runtime::ofProcess(),
                                             name, *root, addrs,
                                             queueingHook(log, key)));
  }
  if (!attached->ok())
    throw std::runtime_error(attached->status().message());
  auto state = attached->value();
  return PyProcs(monarch::ProcMesh(state, *root), std::move(log),
                 escalationPort(key), key, true, state);
}

/// Without `hosts` on this machine; with a "monarch.HostMesh" capsule (from
/// monarch._C, meshes across hosts) through its agents: then `shape`'s first
/// dim is the hosts and the rest is spawned on every host.
PyProcs spawnProcs(const std::vector<std::pair<std::string, int64_t>> &shape,
                   const std::string &name, const std::string &workerPath,
                   int64_t readyTimeoutMs,
                   const std::vector<std::string> &workerArgs,
                   const std::map<std::string, std::string> &workerEnv,
                   const py::object &hosts) {
  monarch::SpawnProcsOptions options;
  options.name = name;
  options.workerPath = workerPath;
  options.workerArgs = workerArgs;
  options.workerEnv.assign(workerEnv.begin(), workerEnv.end());
  options.readyTimeout = std::chrono::milliseconds(readyTimeoutMs);
  std::shared_ptr<monarch::host::HostMesh> hostMesh;
  if (!hosts.is_none()) {
    auto capsule = hosts.cast<py::capsule>();
    if (std::string(capsule.name() ? capsule.name() : "") != "monarch.HostMesh")
      throw py::type_error("hosts takes a monarch.HostMesh capsule");
    hostMesh = *capsule.get_pointer<std::shared_ptr<monarch::host::HostMesh>>();
    if (shape.empty() ||
        shape.front().second != static_cast<int64_t>(hostMesh->size()))
      throw py::value_error("the first dim must be the " +
                            std::to_string(hostMesh->size()) + " hosts");
  }
  std::optional<monarch::Expected<monarch::ProcMesh>> r;
  {
    py::gil_scoped_release release;
    if (hostMesh)
      r.emplace(hostMesh->spawnProcs(
          monarch::Shape(shape.begin() + 1, shape.end()), options));
    else
      r.emplace(monarch::thisHost().spawnProcs(shape, options));
  }
  if (!r->ok())
    throw std::runtime_error(r->status().message());
  auto log = std::make_shared<EventLog>();
  // Handled here: Python decides (the owner's __supervise__, escalation, the
  // controller's unhandled_fault_hook) and raises the failure at the calls
  // that touch it (SupervisionError) instead of the default root handler
  // ending the process; the events stay readable through Procs.events().
  r->value().supervise(queueingHook(log, name));
  return PyProcs(std::move(r->value()), std::move(log), escalationPort(name),
                 name, false);
}

/// The tensor workers' proc mesh (a "monarch.ProcMesh" capsule from
/// monarch._C): actors spawned there share a process with their rank's
/// executor (rref). Its proc-level supervision stays with the tensor
/// controller.
PyProcs procsFromCapsule(const py::capsule &capsule, const std::string &key) {
  if (std::string(capsule.name() ? capsule.name() : "") != "monarch.ProcMesh")
    throw py::type_error("procs_from_capsule takes a monarch.ProcMesh capsule");
  const auto *procs = capsule.get_pointer<monarch::ProcMesh>();
  return PyProcs(*procs, std::make_shared<EventLog>(), escalationPort(key), key,
                 true);
}

/// The next queued supervision event: (procs, kind, mesh, rank, reason), or
/// None after the timeout.
py::object nextSupervisionEvent(int64_t timeoutMs) {
  std::optional<QueuedEvent> event;
  {
    py::gil_scoped_release release;
    event = SupervisionQueue::instance().pop(
        std::chrono::milliseconds(std::max<int64_t>(timeoutMs, 0)));
  }
  if (!event)
    return py::none();
  return py::make_tuple(event->procs, event->kind, event->event.mesh,
                        event->event.rank, event->event.reason);
}

/// Sends an unhandled event up to the owner's port (see spawnProcs).
void escalate(const std::string &addr, int64_t port, const std::string &mesh,
              int64_t rank, const std::string &reason) {
  monarch::proto::PortRef ref;
  ref.set_addr(addr);
  ref.set_port(static_cast<uint64_t>(port));
  monarch::proto::Value value;
  monarch::PayloadList payloads;
  monarch::encodeValue(
      std::vector<std::string>{mesh, std::to_string(rank), reason}, value,
      payloads);
  monarch::Status status;
  {
    py::gil_scoped_release release;
    status = monarch::sendToPort(ref, std::move(value), std::move(payloads));
  }
  if (!status.isOk())
    throw std::runtime_error("escalating a supervision event: " +
                             status.toString());
}

// -- The actor class served by Python workers --------------------------------

std::string pythonErrorText(py::error_already_set &e) {
  // monarch._src.actor.worker raises errors whose str() is the formatted
  // traceback.
  try {
    return py::str(e.value()).cast<std::string>();
  } catch (...) {
    return e.what();
  }
}

/// Whether Python may be entered: never again once it is finalizing.
bool pythonUsable() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

/// The Python thread state of the actor's own thread (the class is
/// ownThread(): its constructor, calls and destructor all run on one
/// thread), made once for the actor's life: thread-local state set in
/// __init__ stays visible to the endpoints (Monarch's rule), and an async
/// endpoint's event loop is the actor's own. Between calls the GIL is free.
class ActorThreadState {
public:
  ActorThreadState() {
    gil = PyGILState_Ensure();
    state = PyEval_SaveThread();
  }
  ~ActorThreadState() {
    if (!pythonUsable())
      return; // no interpreter to give the state back to: leaked
    PyEval_RestoreThread(state);
    PyGILState_Release(gil);
  }
  ActorThreadState(const ActorThreadState &) = delete;
  ActorThreadState &operator=(const ActorThreadState &) = delete;

  /// Runs `body` with the GIL under this thread state.
  template <typename Body> void run(Body &&body) {
    PyEval_RestoreThread(state);
    struct Save {
      PyThreadState *&state;
      ~Save() { state = PyEval_SaveThread(); }
    } save{state};
    body();
  }

private:
  PyGILState_STATE gil;
  PyThreadState *state = nullptr;
};

class PythonActor : public monarch::Actor {
public:
  explicit PythonActor(Frames frames) {
    const auto &ctx = context();
    std::string mesh = ctx.mesh, procId = ctx.procId;
    int64_t rank = ctx.rank, procRank = ctx.procRank;
    withPython([&] {
      py::module_ worker = py::module_::import("monarch._src.actor.worker");
      py::dict c;
      c["mesh"] = mesh;
      c["rank"] = rank;
      c["proc_rank"] = procRank;
      c["proc_id"] = procId;
      py::object made = worker.attr("construct")(toPy(frames), c);
      instance = std::make_unique<py::object>(std::move(made));
      invoke = std::make_unique<py::object>(worker.attr("invoke"));
      idleFn = std::make_unique<py::object>(worker.attr("idle"));
    });
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      wakeRead = fds[0];
      wakeWrite = fds[1];
    }
  }
  ~PythonActor() override {
    if (instance && pythonUsable()) {
      python.run([&] {
        idleFn.reset();
        invoke.reset();
        instance.reset();
      });
    } else { // no interpreter to drop them in
      (void)idleFn.release();
      (void)invoke.release();
      (void)instance.release();
    }
    for (int fd : {wakeRead, wakeWrite})
      if (fd >= 0)
        ::close(fd);
  }

  /// Between messages: the actor's asyncio tasks run (worker.idle) until
  /// wake() writes to the pipe the event loop watches. Nothing is run when
  /// the actor has no pending task.
  void idle() override {
    if (!idleFn || wakeRead < 0 || !pythonUsable())
      return;
    python.run([&] {
      try {
        (*idleFn)(*instance, wakeRead);
      } catch (py::error_already_set &e) {
        monarch::log::error("actor ", context().mesh, "[", context().rank,
                            "]: its asyncio tasks failed: ",
                            pythonErrorText(e));
      }
    });
  }
  void wake() override {
    if (wakeWrite >= 0) {
      char byte = 1;
      // Full pipe: a wake-up is already pending, which is all that counts.
      (void)!::write(wakeWrite, &byte, 1);
    }
  }

  /// Runs `method` of the Python object. The reply is always a pickle (an
  /// endpoint's exception travels as a value, so the actor lives on) unless
  /// the flags say the call has no reply (broadcast): then the exception is
  /// raised here, which stops the actor and reports it to the owner.
  Frames call(std::string method, Frames frames, int64_t flags) {
    Frames reply;
    withPython([&] {
      py::object out = (*invoke)(*instance, method, toPy(frames), flags);
      reply = fromPy(py::reinterpret_borrow<py::sequence>(out));
    });
    return reply;
  }

  /// The address this actor's proc listens on (references to meshes that
  /// travel to other processes carry it).
  std::string where() { return monarch::Runtime::ofProcess().addr(); }

private:
  /// Runs `body` with the GIL on the actor's thread. An exception there,
  /// Python's or C++'s, is raised here with its text: the runtime makes it
  /// the call's error (or, for a broadcast, what stops the actor).
  template <typename Body> void withPython(Body &&body) {
    std::string error;
    python.run([&] {
      try {
        body();
      } catch (py::error_already_set &e) {
        error = pythonErrorText(e);
      } catch (const std::exception &e) {
        error = e.what();
      }
    });
    if (!error.empty())
      throw std::runtime_error(error);
  }

  ActorThreadState python; // first: made before, dropped after the objects
  std::unique_ptr<py::object> instance;
  /// monarch._src.actor.worker.invoke and .idle, looked up once.
  std::unique_ptr<py::object> invoke;
  std::unique_ptr<py::object> idleFn;
  /// The pipe wake() writes to and idle()'s event loop watches.
  int wakeRead = -1;
  int wakeWrite = -1;
};

const bool registered = [] {
  return monarch::ActorClass<PythonActor>("monarch.PythonActor")
      .constructor<Frames>()
      .ownThread()
      .endpoint("call", &PythonActor::call)
      .endpoint("where", &PythonActor::where)
      .install();
}();

} // namespace

PYBIND11_MODULE(_actors, m) {
  m.doc() = "Python actors on the monarch C++ runtime (docs/python.md)";
  (void)registered;

  py::class_<Frame>(m, "Frame", py::buffer_protocol())
      .def_buffer([](Frame &f) -> py::buffer_info {
        return py::buffer_info(const_cast<uint8_t *>(f.buffer.data()), 1,
                               py::format_descriptor<uint8_t>::format(),
                               static_cast<py::ssize_t>(f.buffer.size()),
                               /*readonly=*/true);
      })
      .def("__len__", [](const Frame &f) { return f.buffer.size(); });

  py::class_<MeshFuture>(m, "MeshFuture")
      .def("get", &MeshFuture::get, py::arg("timeout_ms"))
      .def("ready", &MeshFuture::ready);
  py::class_<OneFuture>(m, "OneFuture")
      .def("get", &OneFuture::get, py::arg("timeout_ms"))
      .def("ready", &OneFuture::ready);

  py::class_<PyActors>(m, "Actors")
      .def_property_readonly("name", &PyActors::name)
      .def("shape", &PyActors::shape)
      .def("ranks", &PyActors::ranks)
      .def("slice", &PyActors::slice)
      .def("call", &PyActors::call)
      .def("call_one", &PyActors::callOne)
      .def("choose", &PyActors::choose)
      .def("stream", &PyActors::stream)
      .def("broadcast", &PyActors::broadcast)
      .def("addrs", &PyActors::addrs, py::arg("timeout_ms"));

  py::class_<PyProcs>(m, "Procs")
      .def_property_readonly("name", &PyProcs::name)
      .def("shape", &PyProcs::shape)
      .def("ranks", &PyProcs::ranks)
      .def("slice", &PyProcs::slice)
      .def("spawn", &PyProcs::spawn)
      .def("pids", &PyProcs::pids)
      .def("events", &PyProcs::events)
      .def("supervision_port", &PyProcs::supervisionPort)
      .def("attach_actors", &PyProcs::attachActors, py::arg("name"),
           py::arg("proc_ranks"), py::arg("shape"))
      .def("stop", &PyProcs::stop);

  m.def("spawn_procs", &spawnProcs, py::arg("shape"), py::arg("name"),
        py::arg("worker_path"), py::arg("ready_timeout_ms") = 30000,
        py::arg("worker_args") = std::vector<std::string>{},
        py::arg("worker_env") = std::map<std::string, std::string>{},
        py::arg("hosts") = py::none());
  m.def("procs_from_capsule", &procsFromCapsule, py::arg("capsule"),
        py::arg("key"));
  m.def("attach_procs", &attachProcs, py::arg("name"), py::arg("shape"),
        py::arg("addrs"), py::arg("key"));
  m.def("next_supervision_event", &nextSupervisionEvent, py::arg("timeout_ms"));
  // Files of the controller that must not outlive it (the Python workers'
  // launcher scripts): inside this directory they are removed on every
  // exit path, SIGTERM and SIGKILL included (runtime/util/OwnedDirs.h).
  // In a worker, the worker's own runtime's (removed before it exits).
  m.def(
      "private_dir", [] { return monarch::Runtime::ofProcess().privateDir(); },
      "the runtime's private directory, removed however the process ends");
  m.def(
      "enable_liveness_events", [] { livenessEvents = true; },
      "queue unresponsive/responsive events with those kinds");
  m.def("escalate", &escalate, py::arg("addr"), py::arg("port"),
        py::arg("mesh"), py::arg("rank"), py::arg("reason"));
  m.def("is_worker_process", &monarch::isWorkerProcess);
  monarch::python::bindPorts(m);
  m.def("run_worker", [] {
    int rc;
    {
      py::gil_scoped_release release;
      rc = monarch::runWorker();
    }
    return rc;
  });
}
