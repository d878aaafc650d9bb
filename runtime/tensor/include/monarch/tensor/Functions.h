//===- Functions.h - Registered C++ functions and actor endpoints -*- C++ -*-//
//
// CallFunction names a function registered here; CallActor goes through the
// worker's ActorBridge. Both receive converted arguments (tensors are the
// local shards) and return the tensors bound to the instruction's results.
// Throwing fails the instruction like any ATen error.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_FUNCTIONS_H
#define MONARCH_TENSOR_FUNCTIONS_H

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include "monarch/tensor/plan.pb.h"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace monarch::tensor {

using TensorFunction =
    std::function<std::vector<at::Tensor>(const std::vector<c10::IValue> &)>;

/// Makes the function for a name no one registered (null: unknown), given
/// the by-value definition the instruction carried ("" when it names the
/// function only). The Python tensor worker installs one that resolves
/// "python:module:qualname" to a Python function, and "python:@digest:name"
/// to the function pickled in the definition (monarch.remote, docs/python.md).
using FunctionResolver = std::function<TensorFunction(
    const std::string &name, const std::string &definition)>;

class FunctionRegistry {
public:
  static FunctionRegistry &global();
  /// Replaces any function of the same name.
  void add(const std::string &name, TensorFunction fn);
  /// Consulted by find() for unknown names; a function it makes is kept.
  void setResolver(FunctionResolver resolver);
  /// Null when unknown. `definition` goes to the resolver when `name` is
  /// new; a name once resolved keeps its function.
  TensorFunction find(const std::string &name,
                      const std::string &definition = {});

private:
  std::mutex mutex;
  std::unordered_map<std::string, TensorFunction> functions;
  FunctionResolver resolver;
};

/// Registers a function at static-initialization time.
struct RegisterFunction {
  RegisterFunction(const std::string &name, TensorFunction fn) {
    FunctionRegistry::global().add(name, std::move(fn));
  }
};

/// Calls an endpoint of this rank's actor with local shards (the `rref`
/// adverb): `call` is the instruction (actor mesh, endpoint, and -- for actors
/// in processes of their own -- the route to them), `args` its converted
/// arguments. The Python tensor worker's bridge runs actors of its own
/// process; a native worker's (RemoteActorBridge.h) messages the actor's.
class ActorBridge {
public:
  virtual ~ActorBridge() = default;
  virtual std::vector<at::Tensor> call(const plan::CallActor &call,
                                       const std::vector<c10::IValue> &args) = 0;
};

/// The bridge the tensor workers of this process give their executors (the
/// Python tensor worker sets one that calls its Python actors; null: none).
void setProcessActorBridge(std::shared_ptr<ActorBridge> bridge);
std::shared_ptr<ActorBridge> processActorBridge();

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_FUNCTIONS_H
