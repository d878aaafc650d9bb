//===- Actors.cpp - monarch._actors: Python actors on the C++ runtime -----===//
//
// One extension, two roles (docs/python.md, "Actors"):
//
//  * In the controller it drives the actor runtime (MonarchRuntime only; no
//    tensor engine): spawn_procs() starts a proc mesh whose workers are
//    Python processes (`python3 -m monarch._worker`, through a tiny launcher
//    script since the local launcher execs a path without arguments), Procs
//    spawns actor meshes of the generic C++ class "monarch.PythonActor", and
//    Actors sends the adverbs. Every value crosses as a list of raw frames:
//    frame 0 is a pickle, the others its out-of-band buffers (pickle protocol
//    5), each one Blob payload on the wire.
//
//  * In a worker, importing the module registers "monarch.PythonActor" and
//    run_worker() serves (monarch::runWorker with the GIL released). The
//    actor's constructor and its single endpoint "call" take the GIL and call
//    monarch._worker.construct / invoke, which unpickle the class, the
//    arguments, run the Python method and pickle the result.
//
// Blocking calls release the GIL; no callback ever takes the GIL on the io
// thread (await is served from a Python thread).
//
//===----------------------------------------------------------------------===//

#include "monarch/runtime/Monarch.h"
#include "monarch/runtime/proc/Worker.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;
using monarch::Blob;
using monarch::Buffer;

namespace {

using Frames = std::vector<Blob>;

/// A received frame, exposed to Python through the buffer protocol (no copy;
/// memoryviews of it keep it alive).
struct Frame {
  Buffer buffer;
};

py::list toPy(const Frames &frames) {
  py::list out;
  for (const auto &f : frames)
    out.append(py::cast(Frame{f.buffer}));
  return out;
}

Frames fromPy(const py::sequence &frames) {
  Frames out;
  out.reserve(frames.size());
  for (auto item : frames) {
    py::buffer buf = py::reinterpret_borrow<py::buffer>(item);
    py::buffer_info info = buf.request();
    out.push_back(Blob{Buffer::copyOf(
        info.ptr, static_cast<size_t>(info.size * info.itemsize))});
  }
  return out;
}

py::tuple errorTuple(const monarch::Status &status) {
  return py::make_tuple("err", monarch::errorCodeName(status.code()),
                        status.message());
}

// -- Supervision events recorded for Python ----------------------------------

struct EventLog {
  std::mutex mu;
  std::vector<monarch::SupervisionEvent> events;
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

class PyProcs {
public:
  PyProcs(monarch::ProcMesh mesh, std::shared_ptr<EventLog> log)
      : mesh(std::move(mesh)), log(std::move(log)) {}

  std::string name() const { return mesh.name(); }
  std::vector<std::pair<std::string, int64_t>> shape() const {
    return shapeOf(mesh.view());
  }
  std::vector<int64_t> ranks() const { return mesh.view().ranks(); }

  PyProcs slice(const std::string &dim, int64_t start, int64_t stop,
                int64_t step) const {
    return PyProcs(sliced(mesh, dim, start, stop, step), log);
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
};

PyProcs spawnProcs(const std::vector<std::pair<std::string, int64_t>> &shape,
                   const std::string &name, const std::string &workerPath,
                   int64_t readyTimeoutMs) {
  monarch::SpawnProcsOptions options;
  options.name = name;
  options.workerPath = workerPath;
  options.readyTimeout = std::chrono::milliseconds(readyTimeoutMs);
  std::optional<monarch::Expected<monarch::ProcMesh>> r;
  {
    py::gil_scoped_release release;
    r.emplace(monarch::thisHost().spawnProcs(shape, options));
  }
  if (!r->ok())
    throw std::runtime_error(r->status().message());
  auto log = std::make_shared<EventLog>();
  // Handled here: Python raises the failure at the calls that touch it
  // (SupervisionError) instead of the default root handler ending the
  // controller; the events stay readable through Procs.events().
  r->value().supervise([log](const monarch::SupervisionEvent &event) {
    std::lock_guard<std::mutex> guard(log->mu);
    log->events.push_back(event);
    return true;
  });
  return PyProcs(std::move(r->value()), std::move(log));
}

// -- The actor class served by Python workers --------------------------------

std::string pythonErrorText(py::error_already_set &e) {
  // monarch._worker raises errors whose str() is the formatted traceback.
  try {
    return py::str(e.value()).cast<std::string>();
  } catch (...) {
    return e.what();
  }
}

class PythonActor : public monarch::Actor {
public:
  explicit PythonActor(Frames frames) {
    py::gil_scoped_acquire gil;
    try {
      const auto &ctx = context();
      py::dict c;
      c["mesh"] = ctx.mesh;
      c["rank"] = ctx.rank;
      c["proc_rank"] = ctx.procRank;
      c["proc_id"] = ctx.procId;
      py::object made = py::module_::import("monarch._worker")
                            .attr("construct")(toPy(frames), c);
      instance = std::make_unique<py::object>(std::move(made));
    } catch (py::error_already_set &e) {
      throw std::runtime_error(pythonErrorText(e));
    }
  }
  ~PythonActor() override {
    if (instance && Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      instance.reset();
    }
  }

  /// Runs `method` of the Python object. The reply is always a pickle (an
  /// endpoint's exception travels as a value, so the actor lives on) unless
  /// the flags say the call has no reply (broadcast): then the exception is
  /// raised here, which stops the actor and reports it to the owner.
  Frames call(std::string method, Frames frames, int64_t flags) {
    py::gil_scoped_acquire gil;
    try {
      py::object out =
          py::module_::import("monarch._worker")
              .attr("invoke")(*instance, method, toPy(frames), flags);
      return fromPy(py::reinterpret_borrow<py::sequence>(out));
    } catch (py::error_already_set &e) {
      throw std::runtime_error(pythonErrorText(e));
    }
  }

private:
  std::unique_ptr<py::object> instance;
};

const bool registered = [] {
  return monarch::ActorClass<PythonActor>("monarch.PythonActor")
      .constructor<Frames>()
      .endpoint("call", &PythonActor::call)
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
      .def("broadcast", &PyActors::broadcast);

  py::class_<PyProcs>(m, "Procs")
      .def_property_readonly("name", &PyProcs::name)
      .def("shape", &PyProcs::shape)
      .def("ranks", &PyProcs::ranks)
      .def("slice", &PyProcs::slice)
      .def("spawn", &PyProcs::spawn)
      .def("pids", &PyProcs::pids)
      .def("events", &PyProcs::events)
      .def("stop", &PyProcs::stop);

  m.def("spawn_procs", &spawnProcs, py::arg("shape"), py::arg("name"),
        py::arg("worker_path"), py::arg("ready_timeout_ms") = 30000);
  m.def("is_worker_process", &monarch::isWorkerProcess);
  m.def("run_worker", [] {
    int rc;
    {
      py::gil_scoped_release release;
      rc = monarch::runWorker();
    }
    return rc;
  });
}
