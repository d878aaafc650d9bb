//===- Internal.h - Executor internals (torch-including) --------*- C++ -*-===//
#ifndef MONARCH_TENSOR_LIB_INTERNAL_H
#define MONARCH_TENSOR_LIB_INTERNAL_H

#include "monarch/mesh/MeshView.h"
#include "monarch/tensor/Collectives.h"
#include "monarch/tensor/plan.pb.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace monarch::tensor::detail {

/// The root failure an errored ref points at (DESIGN.md §6.5).
struct ErrorRecord {
  int64_t instruction;
  int64_t rank;
  std::string message;
  std::string location;
};
using ErrorPtr = std::shared_ptr<const ErrorRecord>;

/// What a ref holds: a tensor, or the error that prevented computing it.
struct RefValue {
  at::Tensor tensor;
  ErrorPtr error;
};

/// Thrown inside an instruction when an input is an error: the outputs
/// become dependent errors and nothing new is reported.
struct DependentError {
  ErrorPtr root;
};

/// Resolves a ref to its tensor; throws DependentError for an errored ref.
using RefLookup = std::function<at::Tensor(int64_t)>;

/// ref -> value, shared by the streams of one worker.
class RefTable {
public:
  void set(int64_t ref, RefValue value);
  /// Throws std::runtime_error when the ref has no value on this rank.
  RefValue get(int64_t ref) const;
  void erase(int64_t ref);
  size_t size() const;

private:
  mutable std::mutex mutex;
  std::unordered_map<int64_t, RefValue> values;
};

/// A CPU "event": a completion marker one stream sets and another waits on.
class Event {
public:
  void signal();
  bool wait(std::chrono::milliseconds timeout);

private:
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
};

/// An ordered queue of tasks run by one dedicated thread (a CPU stream).
/// A dedicated thread rather than a TBB arena task: stream tasks block (on
/// collectives with other processes and on borrow events from other
/// streams), and a pool bounded by the core count could starve the very
/// stream a blocked task waits for.
class SerialQueue {
public:
  explicit SerialQueue(std::string name);
  ~SerialQueue(); ///< Runs what is queued, then joins.
  void push(std::function<void()> task);
  /// While held, push() does not wake a parked thread (a host submitting a
  /// whole plan wakes it once at the end instead of once per instruction).
  void holdWakeups(bool hold);
  /// Waits until the queue is empty and no task runs; false on timeout.
  bool waitIdle(std::chrono::milliseconds timeout);
  const std::string &name() const { return label; }

private:
  void loop();

  std::string label;
  std::mutex mutex;
  std::condition_variable wake, idle;
  std::deque<std::function<void()>> tasks;
  std::atomic<size_t> pending{0}; ///< queued tasks, readable without the lock
  bool running = false;
  bool sleeping = false;
  bool holding = false;
  bool stopping = false;
  std::thread thread;
};

// --- Values.cpp -------------------------------------------------------------

at::ScalarType toScalarType(plan::DType dtype);
plan::DType toDType(at::ScalarType type);
/// A copy of serialized tensor data.
at::Tensor fromTensorData(const plan::TensorData &data);
/// Contiguous CPU bytes of `t`.
void toTensorData(const at::Tensor &t, plan::TensorData *out);
/// cuda -> cpu when this process has no GPU, warning once per process.
c10::Device mapDevice(c10::Device device);
/// True when `v` names no ref (it can be converted once at submit time).
bool isConstant(const plan::Value &v);
/// `v` as an argument of schema type `type`.
c10::IValue toIValue(const plan::Value &v, const c10::TypePtr &type,
                     int64_t fixedListSize, const RefLookup &lookup);
/// `v` by its own kind (registered functions, actor endpoints).
c10::IValue toIValue(const plan::Value &v, const RefLookup &lookup);

// --- MemoryCap.cpp ----------------------------------------------------------

/// Installs (once) a CPU allocator that fails allocations past `bytes` of
/// live tensor memory in this process; 0 lifts the cap.
void setMemoryCap(size_t bytes);
size_t memoryInUse();

// --- Collective.cpp ---------------------------------------------------------

/// Communicators created once per key and cached (DESIGN.md §5).
class CommunicatorCache {
public:
  Expected<std::shared_ptr<Communicator>> get(CollectiveBackend &backend,
                                              const std::string &key,
                                              const std::vector<int64_t> &ranks,
                                              int64_t self);
  /// Next point-to-point tag of a communicator (the same sequence on every
  /// member, since members issue its instructions in the same order).
  uint64_t nextTag(const std::string &key);

private:
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<Communicator>> comms;
  std::unordered_map<std::string, uint64_t> tags;
};

/// Everything a collective instruction needs on its stream.
struct CollectiveEnv {
  int64_t rank;
  int64_t stream;
  CollectiveBackend *backend; ///< may be null
  CommunicatorCache *cache;
  RefTable *table;
  /// Reports a root failure and returns its record.
  std::function<ErrorPtr(const std::string &)> fail;
  /// Set when the input failed a check on this rank only: the rank still
  /// takes part, with zeros.
  ErrorPtr inputError;
};

/// DESIGN.md §6.2 on this rank; returns normally after binding the result
/// (a tensor or an error) so every member took part.
void runReduce(const CollectiveEnv &env, const plan::Reduce &reduce,
               const mesh::MeshView &view);
/// DESIGN.md §6.3.
void runSend(const CollectiveEnv &env, const plan::SendTensor &send,
             const mesh::MeshView &source, const mesh::MeshView &dest);
/// Static checks of a reduce (the same on every rank): result shape and
/// the §6.2 error rows. Empty string when valid.
std::string checkReduce(const plan::Reduce &reduce, const mesh::MeshView &view);
std::string checkSend(const mesh::MeshView &source, const mesh::MeshView &dest);

} // namespace monarch::tensor::detail

#endif // MONARCH_TENSOR_LIB_INTERNAL_H
