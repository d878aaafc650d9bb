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
// After a worker dies the controller keeps serving the live ones (Controller.h
// "Supervision"): submit() succeeds, fetches from the dead rank come back as
// FetchReply errors with `supervision` set.
//
//===----------------------------------------------------------------------===//

#include "monarch/runtime/host/AttachHosts.h"
#include "monarch/tensor/Controller.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
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
};

} // namespace

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
}
