//===- TensorWorker.cpp - monarch._tensor_worker: the Python tensor worker
//-===//
//
// Imported by a Python worker process (monarch/_worker.py with
// MONARCH_WORKER_KIND=tensor, docs/python.md "remote") to serve the C++
// TensorWorker actor -- the same Executor as monarch-tensor-worker -- in a
// process that can also run Python: it installs a resolver in the executor's
// function registry that turns "python:<module>:<qualname>" (and the
// "python-meta:" probe; "python:@<digest>:<qualname>" for a function sent by
// value) into a call of monarch._remote_exec.call with the GIL held, and gives the executors a bridge to this process's Python actors
// (call_actor, the rref adverb). Tensors cross as the same at::Tensor objects
// (this process's libtorch is the one torch's Python bindings use), so shards
// are not copied.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/TensorWorker.h"
#include "monarch/tensor/Functions.h"

#include <torch/csrc/autograd/python_variable.h>

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;
using monarch::tensor::TensorFunction;

namespace {

py::object toPy(const c10::IValue &v) {
  if (v.isTensor())
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(v.toTensor()));
  if (v.isNone())
    return py::none();
  if (v.isBool())
    return py::bool_(v.toBool());
  if (v.isInt())
    return py::int_(v.toInt());
  if (v.isDouble())
    return py::float_(v.toDouble());
  if (v.isString())
    return py::str(v.toStringRef());
  if (v.isList()) {
    py::list out;
    for (const c10::IValue &e : v.toListRef())
      out.append(toPy(e));
    return out;
  }
  if (v.isTuple()) {
    py::list out;
    for (const c10::IValue &e : v.toTupleRef().elements())
      out.append(toPy(e));
    return py::tuple(out);
  }
  if (v.isScalar()) {
    at::Scalar s = v.toScalar();
    if (s.isFloatingPoint())
      return py::float_(s.toDouble());
    if (s.isBoolean())
      return py::bool_(s.toBool());
    return py::int_(s.toLong());
  }
  throw std::runtime_error("monarch.remote: cannot pass an argument of type " +
                           v.tagKind() + " to a Python function");
}

std::string pythonError(py::error_already_set &e) {
  std::string type = py::str(e.type().attr("__name__"));
  return type + ": " + std::string(py::str(e.value()));
}

std::vector<at::Tensor> tensorsOf(const py::object &out,
                                  const std::string &what) {
  std::vector<at::Tensor> results;
  for (py::handle item : out) {
    if (!THPVariable_Check(item.ptr()))
      throw std::runtime_error(what + " returned a non-tensor");
    results.push_back(THPVariable_Unpack(item.ptr()));
  }
  return results;
}

/// A Python remote function, by the name the controller sent and the
/// by-value definition (a cloudpickle) it carried, if any.
TensorFunction pythonFunction(const std::string &name,
                              const std::string &definition) {
  return [name, definition](const std::vector<c10::IValue> &args) {
    py::gil_scoped_acquire gil;
    try {
      py::list in;
      for (const auto &a : args)
        in.append(toPy(a));
      py::object out = py::module_::import("monarch._src.tensor.remote_exec")
                           .attr("call")(name, in, py::bytes(definition));
      return tensorsOf(out, name);
    } catch (py::error_already_set &e) {
      throw std::runtime_error(pythonError(e));
    }
  };
}

/// call_actor (rref): an endpoint of the Python actor of this process that
/// belongs to actor mesh `actor`, with the local shards.
class PythonActorBridge : public monarch::tensor::ActorBridge {
public:
  std::vector<at::Tensor> call(const monarch::plan::CallActor &call,
                               const std::vector<c10::IValue> &args) override {
    const std::string &actor = call.actor(), &endpoint = call.endpoint();
    py::gil_scoped_acquire gil;
    try {
      py::list in;
      for (const auto &a : args)
        in.append(toPy(a));
      py::object out = py::module_::import("monarch._src.tensor.remote_exec")
                           .attr("call_actor")(actor, endpoint, in);
      return tensorsOf(out, actor + "." + endpoint);
    } catch (py::error_already_set &e) {
      throw std::runtime_error(pythonError(e));
    }
  }
};

} // namespace

PYBIND11_MODULE(_tensor_worker, m) {
  m.doc() = "The C++ TensorWorker served from a Python worker process "
            "(monarch.remote; docs/python.md)";
  monarch::tensor::tuneHostAllocator();
  monarch::tensor::setProcessActorBridge(std::make_shared<PythonActorBridge>());
  monarch::tensor::registerTensorWorker();
  monarch::tensor::FunctionRegistry::global().setResolver(
      [](const std::string &name,
         const std::string &definition) -> TensorFunction {
        if (name.rfind("python:", 0) == 0 || name.rfind("python-meta:", 0) == 0)
          return pythonFunction(name, definition);
        return nullptr;
      });
}
