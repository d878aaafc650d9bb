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

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace monarch::tensor {

using TensorFunction =
    std::function<std::vector<at::Tensor>(const std::vector<c10::IValue> &)>;

class FunctionRegistry {
public:
  static FunctionRegistry &global();
  /// Replaces any function of the same name.
  void add(const std::string &name, TensorFunction fn);
  /// Null when unknown.
  TensorFunction find(const std::string &name) const;

private:
  mutable std::mutex mutex;
  std::unordered_map<std::string, TensorFunction> functions;
};

/// Registers a function at static-initialization time.
struct RegisterFunction {
  RegisterFunction(const std::string &name, TensorFunction fn) {
    FunctionRegistry::global().add(name, std::move(fn));
  }
};

/// Implemented by the worker actor: calls an endpoint of an actor on the same
/// proc with local shards (the `rref` adverb).
class ActorBridge {
public:
  virtual ~ActorBridge() = default;
  virtual std::vector<at::Tensor>
  call(const std::string &actor, const std::string &endpoint,
       const std::vector<c10::IValue> &args) = 0;
};

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_FUNCTIONS_H
