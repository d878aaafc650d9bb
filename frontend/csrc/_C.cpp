//===- _C.cpp - monarch._C: the C++ controller for the Python frontend ----===//
//
// Binds monarch::tensor::Controller (runtime/tensor, torch-free) for the
// eager path of the Python frontend. Everything crosses as serialized plan
// protobufs (the Python side has its own generated plan_pb2), so this module
// links no Python protobuf runtime. Blocking calls release the GIL.
//
//   c = Controller([("host", 2), ("gpu", 2)], memory_cap=0, timeout_ms=60000,
//                  worker_path="", hosts=[], hosts_file="", secret_file="",
//                  slurm=False, controller_host="", agents_per_node=1)
//   c.declare(program_bytes); c.submit(batch_bytes)
//   c.next_event(timeout_ms) -> None | ("worker", WorkerEvent bytes)
//                                    | ("proc_failure", rank, message)
//       after c.enable_liveness_events(), also
//                                    | ("proc_unresponsive", rank, message, ms)
//                                    | ("proc_responsive", rank, message, ms)
//   c.failed_ranks() -> {rank: message}; c.stopped() -> bool
//   c.size(); c.pids(); c.procs_capsule(); c.host_mesh_capsule(); c.stop()
//
//   s = InstructionStream(c, max_batch=256, max_delay_us=500)  # or (None):
//   record t = s.define_op(call_op_bytes, [(dtype, shape), ...])  # a template
//   loc = s.location("prog.py:12")
//   id = s.op(t, mesh, stream, loc, (x, w), (y,))      # InstructionStream.h
//   id = s.raw(instruction_bytes, [(ref, dtype, shape), ...])
//   s.delete_ref(ref, mesh, stream); s.flush(); s.close()
//   s.declare(program_bytes); s.mesh_origin(mesh, parent, kind, spec)
//   s.op_schema(name, overload, [(arg, default Value bytes or None), ...])
//   s.traced("main") -> TracedProgram bytes            (recording only)
//   s.begin_body(first_local_ref)                      # a compiled step
//   (formals, orphans, fetches, canonical, defined) = s.end_body(id, results,
//                                          end_local_ref, previous, formals)
//   s.abort_body(end_local_ref); s.body_depth; s.body_size
//   id = s.call_recording(recording, actuals, results)
//   id = s.loop(recording, trips, lower, step, carried, captured,
//               [(mesh, stream)...], results)            # a traced range
//   (instructions, locals, next_local) = expand_call(recording_bytes, actuals,
//                                                    results, next_local)
//
// After a worker dies the controller keeps serving the live ones (Controller.h
// "Supervision"): submit() succeeds, fetches from the dead rank come back as
// FetchReply errors with `supervision` set.
//
//===----------------------------------------------------------------------===//

#include "CachedDispatch.h"
#include "InstructionStream.h"

#include "monarch/runtime/host/AttachHosts.h"
#include "monarch/tensor/Controller.h"
#include "monarch/tensor/Plan.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace py = pybind11;
using namespace monarch::tensor;
namespace plan = monarch::plan;

namespace {

[[noreturn]] void raise(const monarch::Status &status) {
  throw std::runtime_error(status.toString());
}

class PyController {
public:
  PyController(std::vector<std::pair<std::string, int64_t>> shape,
               int64_t memoryCap, int64_t timeoutMs, std::string workerPath,
               std::vector<std::string> hostList, std::string hostsFile,
               std::string secretFile, bool slurm, std::string controllerHost,
               int64_t agentsPerNode) {
    if (memoryCap < 0)
      throw py::value_error("memory_cap must be non-negative");
    if (timeoutMs <= 0)
      throw py::value_error("timeout_ms must be positive");
    ControllerOptions options;
    options.shape = std::move(shape);
    options.memoryCapBytes = static_cast<size_t>(memoryCap);
    options.timeout = std::chrono::milliseconds(timeoutMs);
    options.workerPath = std::move(workerPath);
    std::unique_ptr<Controller> started;
    monarch::Status error;
    {
      py::gil_scoped_release release;
      // Multi-host (docs/multi-host.md): the shape's first dim is the hosts.
      if (!options.shape.empty() &&
          (!hostList.empty() || !hostsFile.empty() || slurm)) {
        monarch::host::HostSource source;
        source.hosts = std::move(hostList);
        source.hostsFile = std::move(hostsFile);
        source.secretFile = std::move(secretFile);
        source.slurm = slurm;
        source.controllerHost = std::move(controllerHost);
        source.agentsPerNode = static_cast<int>(agentsPerNode);
        monarch::host::HostMeshOptions meshOptions;
        meshOptions.dim = options.shape.front().first;
        auto attached =
            monarch::host::attachHosts(source, meshOptions, options.timeout);
        if (!attached.ok()) {
          error = attached.status();
        } else {
          hosts = std::move(*attached);
          options.hosts = hosts->mesh();
          if (static_cast<int64_t>(hosts->mesh()->size()) !=
              options.shape.front().second)
            error = monarch::Status(
                monarch::ErrorCode::Invalid,
                "the mesh's first dim " + options.shape.front().first + "=" +
                    std::to_string(options.shape.front().second) +
                    " but there are " + std::to_string(hosts->mesh()->size()) +
                    " hosts");
        }
      }
      if (error.isOk()) {
        auto result = Controller::start(std::move(options));
        if (result)
          started = std::move(result).value();
        else
          error = result.status();
      }
    }
    if (!started)
      raise(error);
    controller = std::move(started);
  }

  Controller &get() {
    if (!controller)
      throw std::runtime_error("the controller was stopped");
    return *controller;
  }

  /// Sends a batch (an InstructionStream's sink; any thread, no GIL).
  monarch::Status submitBatch(const plan::InstructionBatch &batch) {
    std::lock_guard<std::mutex> lock(stopMu);
    if (!controller)
      return monarch::Status(monarch::ErrorCode::Closed,
                             "the controller was stopped");
    return controller->submit(batch);
  }

  void declare(const py::bytes &programBytes) {
    plan::Program program;
    std::string data = programBytes;
    if (!program.ParseFromString(data))
      throw py::value_error(
          "declare: the bytes are not a serialized plan.Program");
    monarch::Status status;
    {
      py::gil_scoped_release release;
      status = get().declare(program);
    }
    if (!status)
      raise(status);
  }

  void submit(const py::bytes &batchBytes) {
    plan::InstructionBatch batch;
    std::string data = batchBytes;
    if (!batch.ParseFromString(data))
      throw py::value_error(
          "submit: the bytes are not a serialized plan.InstructionBatch");
    monarch::Status status;
    {
      py::gil_scoped_release release;
      status = get().submit(batch);
    }
    if (!status)
      raise(status);
  }

  py::object nextEvent(int64_t timeoutMs) {
    std::optional<ControllerEvent> event;
    {
      py::gil_scoped_release release;
      event = get().next(
          std::chrono::milliseconds(std::max<int64_t>(timeoutMs, 0)));
    }
    if (!event)
      return py::none();
    if (event->kind == ControllerEvent::Kind::ProcFailure)
      return py::make_tuple("proc_failure", event->rank, event->message);
    if (event->kind == ControllerEvent::Kind::ProcUnresponsive ||
        event->kind == ControllerEvent::Kind::ProcResponsive) {
      // Only for a frontend that knows them (older ones would parse them
      // as worker events).
      if (!livenessEvents)
        return py::none();
      return py::make_tuple(event->kind ==
                                    ControllerEvent::Kind::ProcUnresponsive
                                ? "proc_unresponsive"
                                : "proc_responsive",
                            event->rank, event->message, event->silentMs);
    }
    std::string bytes;
    event->worker.SerializeToString(&bytes);
    return py::make_tuple("worker", py::bytes(bytes));
  }

  int64_t size() { return get().size(); }

  void enableLivenessEvents() { livenessEvents = true; }

  std::map<int64_t, std::string> failedRanks() {
    return controller ? controller->failedRanks()
                      : std::map<int64_t, std::string>{};
  }

  bool stopped() { return !controller || controller->stopped(); }

  std::vector<int> pids() { return get().pids(); }

  /// The workers' proc mesh for monarch._actors (actors beside the
  /// executors: Python tensor workers, rref), as a capsule "monarch.ProcMesh"
  /// owning a ProcMesh handle. Both extensions link the one MonarchRuntime.
  py::capsule procsCapsule() {
    auto procs = get().procMesh();
    if (!procs)
      throw std::runtime_error("the controller was stopped");
    auto owned = std::make_unique<monarch::ProcMesh>(std::move(*procs));
    py::capsule capsule(owned.get(), "monarch.ProcMesh", [](PyObject *c) {
      std::unique_ptr<monarch::ProcMesh>(static_cast<monarch::ProcMesh *>(
          PyCapsule_GetPointer(c, "monarch.ProcMesh")));
    });
    owned.release(); // now the capsule's
    return capsule;
  }

  /// The host mesh the workers run on (meshes across hosts), as a capsule
  /// "monarch.HostMesh" owning a shared_ptr: monarch._actors starts the
  /// Python actor workers through the same agents. None on one host.
  py::object hostMeshCapsule() {
    if (!hosts)
      return py::none();
    auto owned = std::make_unique<std::shared_ptr<monarch::host::HostMesh>>(
        hosts->mesh());
    py::capsule capsule(owned.get(), "monarch.HostMesh", [](PyObject *c) {
      std::unique_ptr<std::shared_ptr<monarch::host::HostMesh>>(
          static_cast<std::shared_ptr<monarch::host::HostMesh> *>(
              PyCapsule_GetPointer(c, "monarch.HostMesh")));
    });
    owned.release(); // now the capsule's
    return capsule;
  }

  void stop() {
    if (!controller)
      return;
    monarch::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(stopMu);
      status = controller->stop();
      controller.reset();
      hosts.reset(); // detaches; SLURM agents end
    }
    if (!status)
      raise(status);
  }

private:
  bool livenessEvents = false;
  std::unique_ptr<monarch::host::AttachedHosts> hosts; // outlives controller
  std::unique_ptr<Controller> controller;
  std::mutex stopMu; ///< a stream's send never meets stop()
};

using monarch::frontend::InstructionStream;

[[noreturn]] void raiseValue(const monarch::Status &status) {
  if (status.code() == monarch::ErrorCode::Invalid)
    throw py::value_error(status.message());
  throw std::runtime_error(status.toString());
}

template <typename T> T unwrap(monarch::Expected<T> e) {
  if (!e.ok())
    raiseValue(e.status());
  return std::move(e).value();
}

plan::TensorMeta tensorMeta(int64_t dtype, const std::vector<int64_t> &shape) {
  plan::TensorMeta m;
  m.set_dtype(static_cast<plan::DType>(dtype));
  for (int64_t d : shape)
    m.add_shape(d);
  return m;
}

/// The Python face of InstructionStream: a session's instructions to its
/// controller (or recorded, for tracing).
class PyStream {
public:
  /// `target`: a Controller (batches go straight to its workers), None
  /// (record a TracedProgram), or any object with submit(bytes) -- the
  /// in-process simulation -- which is called with the GIL on the issuing
  /// thread (no background flushing for it).
  PyStream(py::object target, size_t maxBatch, int64_t maxDelayUs) {
    monarch::frontend::BatchSink sink;
    monarch::frontend::InstructionStreamOptions options;
    options.maxBatch = maxBatch;
    options.maxDelay =
        std::chrono::microseconds(std::max<int64_t>(maxDelayUs, 0));
    if (py::isinstance<PyController>(target)) {
      PyController *controller = target.cast<PyController *>();
      sink = [controller](const plan::InstructionBatch &b) {
        return controller->submitBatch(b);
      };
    } else if (!target.is_none()) {
      py::object submit = target.attr("submit");
      auto holder = std::make_shared<py::object>(std::move(submit));
      pySink = holder;
      sink = [holder](const plan::InstructionBatch &b) {
        std::string bytes = b.SerializeAsString();
        py::gil_scoped_acquire gil;
        try {
          (*holder)(py::bytes(bytes));
        } catch (py::error_already_set &e) {
          return monarch::Status(monarch::ErrorCode::Closed, e.what());
        }
        return monarch::Status::ok();
      };
      options.maxDelay = std::chrono::microseconds(0);
    }
    stream = std::make_unique<InstructionStream>(std::move(sink), options);
  }

  ~PyStream() {
    // The stream's last flush may call a Python sink: it takes the GIL.
    py::gil_scoped_release release;
    stream.reset();
    if (pySink) {
      py::gil_scoped_acquire gil;
      pySink.reset();
    }
  }

  int64_t defineOp(const py::bytes &callOp,
                   const std::vector<std::pair<int64_t, std::vector<int64_t>>>
                       &resultTypes) {
    std::vector<plan::TensorMeta> types;
    for (const auto &[dtype, shape] : resultTypes)
      types.push_back(tensorMeta(dtype, shape));
    return unwrap(stream->defineOp(std::string(callOp), std::move(types)));
  }

  int64_t location(const std::string &text) { return stream->location(text); }

  /// Every op dispatched comes through here: the append runs with the GIL
  /// held (it only takes the stream's lock, which no one holds for long);
  /// the GIL goes only while a full batch is sent.
  int64_t op(int64_t templateId, int64_t mesh, int64_t streamId,
             int64_t locationId, const std::vector<int64_t> &inputs,
             const std::vector<int64_t> &results) {
    bool full = false;
    int64_t id = unwrap(stream->op(templateId, mesh, streamId, locationId,
                                   inputs, results, &full));
    if (full)
      flush();
    return id;
  }

  int64_t
  raw(const py::bytes &instruction,
      const std::vector<std::tuple<int64_t, int64_t, std::vector<int64_t>>>
          &types) {
    std::vector<plan::RefType> refTypes;
    for (const auto &[ref, dtype, shape] : types) {
      plan::RefType rt;
      rt.set_ref(ref);
      *rt.mutable_meta() = tensorMeta(dtype, shape);
      refTypes.push_back(std::move(rt));
    }
    std::string bytes(instruction);
    py::gil_scoped_release release;
    return unwrap(stream->raw(bytes, refTypes));
  }

  void deleteRef(int64_t ref, int64_t mesh, int64_t streamId) {
    stream->deleteRef(ref, mesh, streamId);
  }

  void flush() {
    monarch::Status s;
    {
      py::gil_scoped_release release;
      s = stream->flush();
    }
    if (!s.isOk())
      raiseValue(s);
  }

  void close() {
    monarch::Status s;
    {
      py::gil_scoped_release release;
      s = stream->close();
    }
    if (!s.isOk())
      raiseValue(s);
  }

  void declare(const py::bytes &programBytes) {
    plan::Program program;
    if (!program.ParseFromString(std::string(programBytes)))
      throw py::value_error(
          "declare: the bytes are not a serialized plan.Program");
    stream->declare(program);
  }

  /// How a mesh view was made: kind "rename" (spec: [(from, to)]), "split"
  /// ([(dim, [names])], [(name, size)]), "slice" ([(dim, index or (start,
  /// stop, step) with None)]), "flatten" (name).
  void meshOrigin(int64_t mesh, int64_t parent, const std::string &kind,
                  const py::object &spec) {
    plan::MeshOrigin o;
    o.set_mesh(mesh);
    o.set_parent(parent);
    if (kind == "rename") {
      auto *r = o.mutable_rename();
      for (auto item : spec) {
        auto pair = item.cast<std::pair<std::string, std::string>>();
        r->add_from(pair.first);
        r->add_to(pair.second);
      }
    } else if (kind == "split") {
      auto parts = spec.cast<py::tuple>();
      auto *sp = o.mutable_split();
      for (auto item : parts[0]) {
        auto pair =
            item.cast<std::pair<std::string, std::vector<std::string>>>();
        auto *d = sp->add_dims();
        d->set_name(pair.first);
        for (const auto &n : pair.second)
          d->add_into(n);
      }
      for (auto item : parts[1]) {
        auto pair = item.cast<std::pair<std::string, int64_t>>();
        auto *sz = sp->add_sizes();
        sz->set_name(pair.first);
        sz->set_size(pair.second);
      }
    } else if (kind == "slice") {
      auto *sl = o.mutable_slice();
      for (auto item : spec) {
        auto pair = item.cast<py::tuple>();
        auto *c = sl->add_coords();
        c->set_dim(pair[0].cast<std::string>());
        py::object v = pair[1];
        if (py::isinstance<py::int_>(v)) {
          c->set_index(v.cast<int64_t>());
        } else {
          auto bounds = v.cast<py::tuple>();
          auto *range = c->mutable_range();
          if (!bounds[0].is_none())
            range->set_start(bounds[0].cast<int64_t>());
          if (!bounds[1].is_none())
            range->set_stop(bounds[1].cast<int64_t>());
          if (!bounds[2].is_none())
            range->set_step(bounds[2].cast<int64_t>());
        }
      }
    } else if (kind == "flatten") {
      o.mutable_flatten()->set_name(spec.cast<std::string>());
    } else {
      throw py::value_error("mesh_origin: unknown kind '" + kind + "'");
    }
    stream->meshOrigin(o);
  }

  /// arguments: [(name, serialized plan.Value default or None)].
  void
  opSchema(const std::string &name, const std::string &overload,
           const std::vector<std::pair<std::string, py::object>> &arguments) {
    plan::OpSchema schema;
    schema.set_name(name);
    schema.set_overload(overload);
    for (const auto &[argName, def] : arguments) {
      auto *a = schema.add_arguments();
      a->set_name(argName);
      if (!def.is_none() && !a->mutable_default_value()->ParseFromString(
                                std::string(def.cast<py::bytes>())))
        throw py::value_error(
            "op_schema: a default is not a serialized plan.Value");
    }
    stream->opSchema(schema);
  }

  py::bytes traced(const std::string &entry) {
    std::string out;
    stream->traced(entry).SerializeToString(&out);
    return py::bytes(out);
  }

  // -- compiled steps (InstructionStream::beginBody) ---------------------
  void beginBody(int64_t firstLocalRef) { stream->beginBody(firstLocalRef); }

  /// (formals, orphans as (ref, mesh, stream), fetches, canonical bytes,
  /// defined).
  py::tuple endBody(int64_t id, const std::vector<int64_t> &results,
                    int64_t endLocalRef, const py::object &previous,
                    const std::optional<std::vector<int64_t>> &formals) {
    std::optional<std::string> prev;
    if (!previous.is_none())
      prev = std::string(previous.cast<py::bytes>());
    monarch::Expected<InstructionStream::EndedBody> ended = [&] {
      py::gil_scoped_release release;
      return stream->endBody(id, results, endLocalRef, prev, formals);
    }();
    InstructionStream::EndedBody e = unwrap(std::move(ended));
    std::vector<std::tuple<int64_t, int64_t, int64_t>> orphans;
    for (const auto &o : e.orphans)
      orphans.emplace_back(o.ref, o.mesh, o.stream);
    return py::make_tuple(e.formals, orphans, e.fetches, py::bytes(e.canonical),
                          e.defined);
  }

  void abortBody(int64_t endLocalRef) { stream->abortBody(endLocalRef); }
  int64_t bodyDepth() const { return stream->bodyDepth(); }
  int64_t bodySize() const { return stream->bodySize(); }

  int64_t callRecording(int64_t recording, const std::vector<int64_t> &actuals,
                        const std::vector<int64_t> &results) {
    py::gil_scoped_release release;
    return unwrap(stream->callRecording(recording, actuals, results));
  }

  int64_t loop(int64_t recording, int64_t trips, int64_t lower, int64_t step,
               const std::vector<int64_t> &carried,
               const std::vector<int64_t> &captured,
               const std::vector<std::pair<int64_t, int64_t>> &induction,
               const std::vector<int64_t> &results) {
    plan::Loop loop;
    loop.set_recording(recording);
    loop.set_trips(trips);
    loop.set_lower(lower);
    loop.set_step(step);
    for (int64_t r : carried)
      loop.add_carried(r);
    for (int64_t r : captured)
      loop.add_captured(r);
    for (const auto &[mesh, streamId] : induction) {
      plan::Induction *i = loop.add_induction();
      i->set_mesh(mesh);
      i->set_stream(streamId);
    }
    for (int64_t r : results)
      loop.add_results(r);
    py::gil_scoped_release release;
    return unwrap(stream->loop(loop));
  }

  int64_t issued() const { return stream->issued(); }
  bool recording() const { return stream->recording(); }
  InstructionStream &instructions() { return *stream; }

private:
  std::unique_ptr<InstructionStream> stream;
  std::shared_ptr<py::object> pySink; ///< released with the GIL held
};

/// One call of a recording as the instructions it stands for: formals and
/// results renamed to the call's refs, every other ref to a fresh local
/// (negative, from `nextLocal` down) -- what the executor does
/// (Executor.cpp callRecording), for the in-process simulation. Returns
/// (instruction bytes, locals to free after the call, next local).
py::tuple expandCall(const py::bytes &recordingBytes,
                     const std::vector<int64_t> &actuals,
                     const std::vector<int64_t> &results, int64_t nextLocal) {
  plan::Recording rec;
  if (!rec.ParseFromString(std::string(recordingBytes)))
    throw py::value_error("expand_call: the bytes are not a plan.Recording");
  if (static_cast<size_t>(rec.formals_size()) != actuals.size() ||
      static_cast<size_t>(rec.results_size()) != results.size())
    throw py::value_error("recording " + std::to_string(rec.id()) +
                          " called with the wrong number of refs");
  std::unordered_map<int64_t, int64_t> rename;
  for (int k = 0; k < rec.formals_size(); ++k)
    rename[rec.formals(k)] = actuals[k];
  for (int k = 0; k < rec.results_size(); ++k)
    rename[rec.results(k)] = results[k];
  std::vector<int64_t> locals;
  py::list out;
  for (const auto &b : rec.body()) {
    plan::Instruction copy = b;
    monarch::tensor::mapRefs(copy, [&](int64_t r) {
      auto [it, inserted] = rename.emplace(r, 0);
      if (inserted) {
        it->second = nextLocal--;
        locals.push_back(it->second);
      }
      return it->second;
    });
    out.append(py::bytes(copy.SerializeAsString()));
  }
  return py::make_tuple(out, locals, nextLocal);
}

} // namespace

namespace monarch::python {

namespace {

/// The PyStream of a monarch._C.InstructionStream object, or null. Every op
/// and every ref's delete comes through here: the exact type is compared,
/// and the value read from the instance's first (only) holder, without
/// pybind11's lookups of registered types.
PyStream *pyStreamOf(PyObject *obj) {
  static PyTypeObject *type = reinterpret_cast<PyTypeObject *>(
      py::type::of<PyStream>().ptr());
  if (!obj || Py_TYPE(obj) != type)
    return nullptr;
  auto *inst = reinterpret_cast<py::detail::instance *>(obj);
  return inst->get_value_and_holder().value_ptr<PyStream>();
}

} // namespace

frontend::InstructionStream *instructionStreamOf(PyObject *obj) {
  PyStream *s = pyStreamOf(obj);
  return s ? &s->instructions() : nullptr;
}

int64_t issueOp(PyObject *stream, int64_t templateId, int64_t mesh,
                int64_t streamId, int64_t locationId,
                const std::vector<int64_t> &inputs,
                const std::vector<int64_t> &results) {
  try {
    PyStream *s = pyStreamOf(stream);
    if (!s)
      throw std::runtime_error("issueOp: not an InstructionStream");
    return s->op(templateId, mesh, streamId, locationId, inputs, results);
  } catch (py::error_already_set &e) {
    e.restore();
  } catch (py::builtin_exception &e) {
    e.set_error(); // a ValueError stays one
  } catch (const std::exception &e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return -1;
}

} // namespace monarch::python

PYBIND11_MODULE(_C, m) {
  m.doc() =
      "monarch._C: the C++ tensor controller (runtime/tensor Controller.h)";
  py::class_<PyController>(m, "Controller")
      .def(py::init<std::vector<std::pair<std::string, int64_t>>, int64_t,
                    int64_t, std::string, std::vector<std::string>, std::string,
                    std::string, bool, std::string, int64_t>(),
           py::arg("shape"), py::arg("memory_cap") = 0,
           py::arg("timeout_ms") = 60000, py::arg("worker_path") = "",
           py::arg("hosts") = std::vector<std::string>{},
           py::arg("hosts_file") = "", py::arg("secret_file") = "",
           py::arg("slurm") = false, py::arg("controller_host") = "",
           py::arg("agents_per_node") = 1)
      .def("declare", &PyController::declare, py::arg("program_bytes"))
      .def("submit", &PyController::submit, py::arg("batch_bytes"))
      .def("next_event", &PyController::nextEvent, py::arg("timeout_ms") = 0)
      .def("size", &PyController::size)
      .def("enable_liveness_events", &PyController::enableLivenessEvents)
      .def("failed_ranks", &PyController::failedRanks)
      .def("stopped", &PyController::stopped)
      .def("pids", &PyController::pids)
      .def("procs_capsule", &PyController::procsCapsule)
      .def("host_mesh_capsule", &PyController::hostMeshCapsule)
      .def("stop", &PyController::stop);
  py::class_<PyStream>(m, "InstructionStream")
      .def(py::init<py::object, size_t, int64_t>(), py::arg("target"),
           py::arg("max_batch") = 256, py::arg("max_delay_us") = 500,
           py::keep_alive<1, 2>()) // the controller outlives its stream
      .def("define_op", &PyStream::defineOp, py::arg("call_op"),
           py::arg("result_types") =
               std::vector<std::pair<int64_t, std::vector<int64_t>>>{})
      .def("location", &PyStream::location)
      .def("op", &PyStream::op)
      .def(
          "raw", &PyStream::raw, py::arg("instruction"),
          py::arg("types") =
              std::vector<std::tuple<int64_t, int64_t, std::vector<int64_t>>>{})
      .def("delete_ref", &PyStream::deleteRef)
      .def("flush", &PyStream::flush)
      .def("close", &PyStream::close)
      .def("declare", &PyStream::declare)
      .def("mesh_origin", &PyStream::meshOrigin)
      .def("op_schema", &PyStream::opSchema)
      .def("traced", &PyStream::traced, py::arg("entry") = "main")
      .def("begin_body", &PyStream::beginBody, py::arg("first_local_ref"))
      .def("end_body", &PyStream::endBody, py::arg("id"), py::arg("results"),
           py::arg("end_local_ref"), py::arg("previous") = py::none(),
           py::arg("formals") = py::none())
      .def("abort_body", &PyStream::abortBody, py::arg("end_local_ref"))
      .def_property_readonly("body_depth", &PyStream::bodyDepth)
      .def_property_readonly("body_size", &PyStream::bodySize)
      .def("call_recording", &PyStream::callRecording, py::arg("recording"),
           py::arg("actuals"), py::arg("results"))
      .def("loop", &PyStream::loop, py::arg("recording"), py::arg("trips"),
           py::arg("lower"), py::arg("step"), py::arg("carried"),
           py::arg("captured"), py::arg("induction"), py::arg("results"))
      .def_property_readonly("issued", &PyStream::issued)
      .def_property_readonly("recording", &PyStream::recording);
  monarch::python::bindRef(m);
  monarch::python::bindCachedDispatch(m);
  m.def("expand_call", &expandCall, py::arg("recording"), py::arg("actuals"),
        py::arg("results"), py::arg("next_local"));
}
