//===- Internal.h - Executor internals (torch-including) --------*- C++ -*-===//
#ifndef MONARCH_TENSOR_LIB_INTERNAL_H
#define MONARCH_TENSOR_LIB_INTERNAL_H

#include "monarch/mesh/MeshView.h"
#include "monarch/tensor/Collectives.h"
#include "monarch/tensor/plan.pb.h"

#include "cuda/DeviceClock.h"

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
  /// >= 0: not the op's failure but that rank's process's (plan::Failure's
  /// supervision / failed_rank).
  int64_t failedRank = -1;
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
/// recording, start ns, end ns, onDevice). onDevice: the span is when its
/// work ran on the stream's GPU (a device-time event, reported once the GPU
/// has passed it); otherwise the host-side span (on a CUDA stream: launch).
using TraceSink = std::function<void(int64_t, int64_t, std::string_view,
                                     int64_t, int64_t, int64_t, bool)>;

// --- cuda/DeviceStream.cpp ---------------------------------------------------
//
// The CUDA side of the executor behind a torch-CUDA-free interface, so only
// one translation unit includes CUDA headers and a CPU-only torch builds
// (and behaves) exactly as without it. Compiled with MONARCH_TORCH_CUDA when
// torch has CUDA; otherwise every factory returns null / -1.

/// A point in a device stream's work (a CUDA event; RAII, destroyed with
/// the last reference).
class DeviceEvent {
public:
  virtual ~DeviceEvent() = default;
};

/// A CUDA graph captured on one DeviceStream (DeviceStream::capture):
/// replay() launches its work on that stream again, reading and writing the
/// device buffers it was captured with (docs/plan.md, "CUDA graphs").
class DeviceGraph {
public:
  virtual ~DeviceGraph() = default;
  virtual void replay() = 0;
  /// Device memory its capture reserved (the growth of its private pool).
  virtual int64_t poolBytes() const = 0;
};

/// The device half of one plan stream: a CUDA stream of this worker's GPU
/// from c10's pool. The plan stream's thread makes it current once, so every
/// ATen call of its tasks launches on it; host-side order stays the
/// thread's queue order.
class DeviceStream {
public:
  virtual ~DeviceStream() = default;
  /// Sets the device and the current CUDA stream of the calling thread.
  virtual void makeCurrent() = 0;
  /// An event of the work enqueued on this stream so far.
  virtual std::shared_ptr<DeviceEvent> record() = 0;
  /// Later work on this stream waits for `event`, on the device (the host
  /// does not block).
  virtual void wait(const DeviceEvent &event) = 0;
  /// Blocks the host until the work enqueued so far has finished; false
  /// on timeout.
  virtual bool synchronize(std::chrono::milliseconds timeout) = 0;
  /// Tells the caching allocator that `t` is in use on this stream, so
  /// freeing it on its own stream does not hand its memory to new work
  /// before this stream's work on it has finished. No-op for CPU tensors.
  virtual void recordUse(const at::Tensor &t) = 0;
  /// Device-time tracing, on when the stream was made with a trace sink
  /// (no-ops otherwise). Called by the stream's own thread only, around
  /// each traced instruction: timed CUDA events before and after its work.
  virtual void traceBegin() = 0;
  virtual void traceEnd(int64_t instruction, std::string_view name,
                        int64_t recording) = 0;
  /// Reports the spans whose work the GPU has finished, in stream order;
  /// never blocks. synchronize() reports them all.
  virtual void traceCollect() = 0;
  /// Captures the work `body` launches on this stream, on the stream's own
  /// thread, as a CUDA graph with its own memory pool: nothing runs on the
  /// device (CPU work in `body` does run). Null, with `error`, when the
  /// capture failed; the stream is usable again and what `body` produced
  /// must be discarded.
  virtual std::unique_ptr<DeviceGraph>
  capture(const std::function<void()> &body, std::string &error) = 0;
  /// The cudaStream_t.
  virtual void *handle() const = 0;
  virtual int device() const = 0;
};

/// This worker's GPU: `rank % device count` when torch has CUDA and a GPU
/// exists (one rank per GPU; with one GPU every rank shares it), else -1.
int workerDevice(int64_t rank);
/// A stream of `device` whose pool CUDA stream is taken by makeCurrent();
/// null without CUDA. With `trace` (outliving it), it also reports the
/// device-time span of each traced instruction as plan stream `stream`.
std::shared_ptr<DeviceStream> makeDeviceStream(int device,
                                               const TraceSink *trace = nullptr,
                                               int64_t stream = 0);
/// The process's worker GPU (one worker per process), used to place
/// tensors requested on any `cuda` device; -1 when none.
void setProcessDevice(int device);
int processDevice();
/// Set once a plan names a cuda device that maps to the worker's GPU;
/// stream threads make their CUDA streams current from then on.
void setCudaWanted();
bool cudaWanted();

/// What a stream thread lends the tasks it runs.
struct StreamContext {
  int64_t stream = 0;
  /// The plan stream's CUDA stream, current on this thread; null on CPU and
  /// until the stream's first task once CUDA is wanted.
  DeviceStream *device = nullptr;
  /// Makes this stream's CUDA stream current now (CUDA becomes wanted) and
  /// returns it, null without a usable GPU: for a rank whose first CUDA
  /// tensor is not one its plan creates but one it receives from another
  /// rank, before anything on this rank has named a cuda device.
  std::function<DeviceStream *()> useDevice;
  /// The device of this stream's last collective: a rank whose input is an
  /// error takes part on it, so it joins the backend its peers use.
  c10::Device collectiveDevice{c10::kCPU};
  bool hasCollectiveDevice = false;
  /// Null unless the executor traces: then composite tasks (recording calls)
  /// report each instruction they run.
  const TraceSink *trace = nullptr;
  /// Between traceStart and traceFinish: an instruction is being traced (a
  /// device made current meanwhile begins its device span then).
  bool tracing = false;
  /// Reused by ATen calls: one allocation per stream instead of per call.
  std::vector<c10::IValue> stack;
};

/// Brackets one traced instruction run on `ctx`'s thread (trace set):
/// returns its host start; on a CUDA stream it also marks the device start
/// (after the host start: the device span cannot precede its launch).
inline int64_t traceStart(StreamContext &ctx) {
  int64_t start = traceNowNs();
  if (ctx.device)
    ctx.device->traceBegin();
  ctx.tracing = true;
  return start;
}

/// Reports the host span from `start`; on a CUDA stream marks the device
/// end (the device span is reported once the GPU has run it).
inline void traceFinish(StreamContext &ctx, int64_t instruction,
                        std::string_view name, int64_t recording,
                        int64_t start) {
  ctx.tracing = false;
  if (ctx.device)
    ctx.device->traceEnd(instruction, name, recording);
  (*ctx.trace)(instruction, ctx.stream, name, recording, start, traceNowNs(),
               false);
}

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
  /// `trace` (may be null) outlives the queue; `device` (may be null) is
  /// made current on the queue's thread before its first task.
  SerialQueue(std::string name, int64_t id, const TraceSink *trace,
              std::shared_ptr<DeviceStream> device = nullptr);
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
  std::shared_ptr<DeviceStream> device;
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
/// An exception's message for a Failure: c10 errors without their C++
/// backtrace (what_without_backtrace()), others as what().
std::string errorMessage(const std::exception &e);
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
  /// `queue`: where the communicator's device work goes (NCCL).
  Expected<std::shared_ptr<Communicator>> get(CollectiveBackend &backend,
                                              const std::string &key,
                                              const std::vector<int64_t> &ranks,
                                              int64_t self,
                                              const DeviceQueue &queue = {});
  /// Next point-to-point tag of a communicator (the same sequence on every
  /// member, since members issue its instructions in the same order).
  uint64_t nextTag(const std::string &key);
  /// Rank `rank`'s process failed: aborts every communicator it is a member
  /// of (Communicator::abort), so members blocked in one -- waiting on a
  /// live peer that already gave up on it -- fail now, not at the timeout.
  void abortWith(int64_t rank);

private:
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<Communicator>> comms;
  std::unordered_map<std::string, std::vector<int64_t>> members;
  std::unordered_map<std::string, uint64_t> tags;
};

/// Everything a collective instruction needs on its stream.
struct CollectiveEnv {
  int64_t rank;
  int64_t stream;
  CollectiveBackend *backend;     ///< CPU tensors (Gloo); may be null
  CollectiveBackend *cudaBackend; ///< CUDA tensors (NCCL); may be null
  /// The stream's CUDA stream (NCCL runs on it); null on CPU.
  DeviceStream *device = nullptr;
  /// The stream's last collective device (read and updated); its
  /// useDevice() when `device` is still null and a tensor is on CUDA.
  StreamContext *context = nullptr;
  CommunicatorCache *cache;
  const RefCells *table; ///< the refs this instruction may touch
  /// Reports a root failure and returns its record.
  std::function<ErrorPtr(const std::string &)> fail;
  /// Set when the input failed a check on this rank only: the rank still
  /// takes part, with zeros.
  ErrorPtr inputError;
  /// Ranks whose processes failed; may be null.
  const PeerHealth *health = nullptr;
  /// Reports a root failure caused by rank `failed`'s process.
  std::function<ErrorPtr(const std::string &, int64_t failed)> failProc;
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
