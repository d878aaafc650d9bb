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
#include <string_view>
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

/// The storage of one ref on this worker. The submit thread gives every
/// defined ref a cell and hands queued instructions pointers to the cells they
/// touch, so stream threads read and write values without a shared table, a
/// hash lookup or a lock. A cell is only touched by the thread of the stream
/// that owns its ref (WRONG_STREAM is checked at submit time; borrows copy
/// the value across streams through their events), in queue order.
struct Cell {
  RefValue value;
  bool bound = false; ///< holds a value or an error

  void set(RefValue v) {
    value = std::move(v);
    bound = true;
  }
  void setTensor(at::Tensor t) {
    value.tensor = std::move(t);
    value.error.reset();
    bound = true;
  }
  void setError(ErrorPtr e) {
    value.tensor.reset();
    value.error = std::move(e);
    bound = true;
  }
  void clear() {
    value = RefValue();
    bound = false;
  }
};

/// The refs one queued instruction may touch, by id (collectives, registered
/// functions: code that names refs rather than cells).
class RefCells {
public:
  void add(int64_t ref, Cell *cell) { cells.emplace_back(ref, cell); }
  /// Throws std::runtime_error when the ref has no value on this rank.
  RefValue get(int64_t ref) const;
  /// Ignored for refs the instruction may not write (checks failed).
  void set(int64_t ref, RefValue value) const;
  /// get() that throws DependentError for an errored ref.
  at::Tensor tensor(int64_t ref) const;

private:
  Cell *find(int64_t ref) const;
  std::vector<std::pair<int64_t, Cell *>> cells;
};

/// Called after each traced instruction: (instruction, stream, name,
/// recording, start ns, end ns).
using TraceSink = std::function<void(int64_t, int64_t, std::string_view,
                                     int64_t, int64_t, int64_t)>;

/// What a stream thread lends the tasks it runs.
struct StreamContext {
  int64_t stream = 0;
  /// Null unless the executor traces: then composite tasks (recording calls)
  /// report each instruction they run.
  const TraceSink *trace = nullptr;
  /// Reused by ATen calls: one allocation per stream instead of per call.
  std::vector<c10::IValue> stack;
};

/// One queued unit of work of an instruction. A task catches its own errors.
class Task {
public:
  virtual ~Task() = default;
  virtual void run(StreamContext &ctx) = 0;

  int64_t instruction = 0;
  int64_t recording = 0;
  /// Trace name; empty for internal steps (e.g. the receiving half of a
  /// borrow) and tasks that report their own events.
  std::string_view name;
};
using TaskPtr = std::unique_ptr<Task>;
using TaskBatch = std::vector<TaskPtr>;

/// A task running a callable.
template <typename F> class FnTask final : public Task {
public:
  explicit FnTask(F f) : fn(std::move(f)) {}
  void run(StreamContext &ctx) override { fn(ctx); }

private:
  F fn;
};
template <typename F> TaskPtr makeTask(F f) {
  return std::make_unique<FnTask<F>>(std::move(f));
}

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
/// stream a blocked task waits for. Tasks arrive in batches (one lock and at
/// most one wake-up per batch, not per instruction).
class SerialQueue {
public:
  /// `trace` (may be null) outlives the queue.
  SerialQueue(std::string name, int64_t id, const TraceSink *trace);
  ~SerialQueue(); ///< Runs what is queued, then joins.
  /// Takes every task of `batch`, leaving it empty.
  void push(TaskBatch &batch);
  /// Waits until the queue is empty and no task runs; false on timeout.
  bool waitIdle(std::chrono::milliseconds timeout);
  /// Number of tasks run so far (they finish in push order).
  uint64_t completed() const { return done.load(std::memory_order_acquire); }
  const std::string &name() const { return label; }

private:
  void loop();

  std::string label;
  int64_t id;
  const TraceSink *trace;
  std::mutex mutex;
  std::condition_variable wake, idle;
  TaskBatch tasks;
  std::atomic<size_t> pending{0}; ///< queued tasks, readable without the lock
  std::atomic<uint64_t> done{0};
  bool running = false;
  bool sleeping = false;
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
  const RefCells *table; ///< the refs this instruction may touch
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
