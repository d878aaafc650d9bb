//===- Executor.cpp - The tensor engine of one worker ---------------------===//
//
// submit() runs on the host's thread and does everything that depends only
// on the plan and this rank's static state: mesh membership, ref ownership
// and borrow checks (DESIGN.md §6.4), operator lookup and argument binding,
// and the resolution of every ref to its storage cell. What touches tensors
// is queued on the instruction's stream as a task. Torch exceptions are
// caught at the instruction boundary and become error records (§6.5).
//
// Cost per instruction matters (docs/benchmarks.md, "Per-instruction
// overhead"): a queued ATen call is one allocation holding its operator, its
// converted constants and the cells of its refs; running it is a boxed call
// on a reused stack with no lookup and no lock. Tasks reach a stream thread
// in batches. A recording whose body is plain ATen calls is compiled once at
// DefineRecording and each call is one task running the compiled body; a
// loop over such a body is one task running every iteration. Other loops
// are expanded one iteration at a time, with the tasks queued ahead of the
// streams bounded (throttleLoop), so a loop's memory does not grow with its
// trips.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Executor.h"

#include "Internal.h"
#include "OutlineStretches.h"
#include "cuda/GraphSegments.h"
#include "monarch/tensor/Functions.h"
#include "monarch/tensor/Plan.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/util/SmallVector.h>
#include <c10/util/flat_hash_map.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <set>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace monarch::tensor {

using namespace detail;

// --- small pieces -----------------------------------------------------------

namespace detail {

Cell *RefCells::find(int64_t ref) const {
  for (const auto &[r, c] : cells)
    if (r == ref)
      return c;
  return nullptr;
}

RefValue RefCells::get(int64_t ref) const {
  Cell *c = find(ref);
  if (!c || !c->bound)
    throw std::runtime_error("ref " + std::to_string(ref) +
                             " has no value on this rank");
  return c->value;
}

void RefCells::set(int64_t ref, RefValue value) const {
  if (Cell *c = find(ref))
    c->set(std::move(value));
}

at::Tensor RefCells::tensor(int64_t ref) const {
  RefValue v = get(ref);
  if (v.error)
    throw DependentError{v.error};
  return v.tensor;
}

void Event::signal() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
  }
  cv.notify_all();
}

bool Event::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  return cv.wait_for(lock, timeout, [&] { return done; });
}

SerialQueue::SerialQueue(std::string name, int64_t id, const TraceSink *trace,
                         std::shared_ptr<DeviceStream> device)
    : label(std::move(name)), id(id), trace(trace), device(std::move(device)),
      thread([this] { loop(); }) {}

SerialQueue::~SerialQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_one();
  thread.join();
}

void SerialQueue::push(TaskBatch &batch) {
  if (batch.empty())
    return;
  bool wakeUp;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (tasks.empty()) {
      // Swapping hands back the (empty) vector the thread last drained, so
      // batches circulate without allocating.
      tasks.swap(batch);
    } else {
      for (auto &t : batch)
        tasks.push_back(std::move(t));
      batch.clear();
    }
    pending.store(tasks.size(), std::memory_order_release);
    wakeUp = sleeping;
  }
  if (wakeUp)
    wake.notify_one();
}

bool SerialQueue::waitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  return idle.wait_for(lock, timeout,
                       [&] { return tasks.empty() && !running; });
}

namespace {
/// MONARCH_DEBUG_CUDA_SYNC / MONARCH_DEBUG_CUDA_SYNC_BEFORE: instruction
/// kinds (`send_tensor`, `borrow_drop`, an op such as `aten::mm`, or `all`)
/// after (before) which a stream waits for its GPU work -- CUDA_LAUNCH_BLOCKING
/// for one kind of instruction, to find which ordering a wrong result lacks
/// (docs/runtime.md, "Debugging CUDA ordering"). Read once per process.
class DebugSync {
public:
  explicit DebugSync(const char *variable) {
    const char *v = std::getenv(variable);
    if (!v || !*v)
      return;
    std::string list(v);
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string::npos)
        end = list.size();
      if (end > start)
        kinds.insert(list.substr(start, end - start));
      start = end + 1;
    }
    all = kinds.count("all") > 0;
  }
  bool operator()(std::string_view kind) const {
    return all || (!kinds.empty() && kinds.count(std::string(kind)) > 0);
  }

private:
  std::set<std::string> kinds;
  bool all = false;
};
} // namespace

void SerialQueue::loop() {
  StreamContext ctx;
  ctx.stream = id;
  ctx.trace = trace;
  // The CUDA stream is made current lazily, before the first task run once
  // the process wants CUDA (a plan named a cuda device): creating a pool
  // stream creates the GPU context, which a CPU-only program on a GPU
  // machine should not pay for (memory, start-up, and a slower exit).
  auto activate = [&] {
    if (!device || ctx.device || !cudaWanted())
      return;
    try {
      device->makeCurrent();
      ctx.device = device.get();
    } catch (...) {
      device.reset(); // unusable GPU: the stream stays a CPU stream
    }
  };
  ctx.useDevice = [&]() -> DeviceStream * {
    setCudaWanted();
    bool had = ctx.device != nullptr;
    activate();
    // A traced task that began before its stream had a device (the receive
    // of a rank's first CUDA tensor) gets its device span from here on: the
    // GPU work it launches comes after. Without this the first transfer of
    // a pipeline stage had no device span, and analyses that pair host and
    // device spans per instruction (examples/pipeline/run.py) lost step.
    if (!had && ctx.device && ctx.tracing)
      ctx.device->traceBegin();
    return ctx.device;
  };
  static const DebugSync syncBefore("MONARCH_DEBUG_CUDA_SYNC_BEFORE"),
      syncAfter("MONARCH_DEBUG_CUDA_SYNC");
  TaskBatch batch;
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    if (tasks.empty() && !stopping) {
      // Spin briefly before parking: a host submitting a stream of small
      // instructions would otherwise pay a futex wake-up per batch.
      lock.unlock();
      // Idle: report the device-time spans the GPU has finished meanwhile.
      if (ctx.device)
        ctx.device->traceCollect();
      auto until =
          std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (pending.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      lock.lock();
      sleeping = true;
      wake.wait(lock, [&] { return stopping || !tasks.empty(); });
      sleeping = false;
    }
    if (tasks.empty()) // stopping, and everything queued has run
      return;
    batch.swap(tasks);
    pending.store(0, std::memory_order_relaxed);
    running = true;
    lock.unlock();
    uint64_t finished = done.load(std::memory_order_relaxed);
    for (auto &task : batch) {
      activate();
      if (ctx.device && syncBefore(task->name))
        (void)ctx.device->synchronize(std::chrono::minutes(1));
      try {
        if (trace && !task->name.empty()) {
          int64_t start = traceStart(ctx);
          task->run(ctx);
          traceFinish(ctx, task->instruction, task->name, task->recording,
                      start);
        } else {
          task->run(ctx);
        }
      } catch (...) {
        // Instruction bodies catch their own errors; nothing may escape a
        // stream thread.
      }
      if (ctx.device && syncAfter(task->name))
        (void)ctx.device->synchronize(std::chrono::minutes(1));
      // Destroyed here, in order: a task may hold the last reference to
      // tensors (constants, a call's locals).
      task.reset();
      done.store(++finished, std::memory_order_release);
    }
    batch.clear();
    lock.lock();
    running = false;
    if (tasks.empty())
      idle.notify_all();
  }
}

} // namespace detail

FunctionRegistry &FunctionRegistry::global() {
  static FunctionRegistry registry;
  return registry;
}

void FunctionRegistry::add(const std::string &name, TensorFunction fn) {
  std::lock_guard<std::mutex> lock(mutex);
  functions[name] = std::move(fn);
}

void FunctionRegistry::setResolver(FunctionResolver r) {
  std::lock_guard<std::mutex> lock(mutex);
  resolver = std::move(r);
}

TensorFunction FunctionRegistry::find(const std::string &name,
                                      const std::string &definition) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = functions.find(name);
  if (it != functions.end())
    return it->second;
  if (!resolver)
    return nullptr;
  TensorFunction fn = resolver(name, definition);
  if (fn)
    functions[name] = fn;
  return fn;
}

namespace {
std::mutex bridgeMu;
std::shared_ptr<ActorBridge> &bridgeSlot() {
  static std::shared_ptr<ActorBridge> bridge;
  return bridge;
}
} // namespace

void setProcessActorBridge(std::shared_ptr<ActorBridge> bridge) {
  std::lock_guard<std::mutex> lock(bridgeMu);
  bridgeSlot() = std::move(bridge);
}

std::shared_ptr<ActorBridge> processActorBridge() {
  std::lock_guard<std::mutex> lock(bridgeMu);
  return bridgeSlot();
}

// --- the executor -----------------------------------------------------------

namespace {

/// What a queued instruction keeps of its plan instruction.
struct InstInfo {
  int64_t id;
  int64_t stream;
  std::string location;
};
using InstPtr = std::shared_ptr<const InstInfo>;

/// An operator's schema digested once per executor.
struct OpInfo {
  struct Arg {
    c10::TypePtr type;
    int64_t fixedSize = 0;
    bool isTensor = false; ///< a plain `Tensor` argument
    bool mutated = false;  ///< `Tensor(a!)`
    bool aliased = false;  ///< `Tensor(a)` or `Tensor(a!)`: a result may alias it
  };
  c10::OperatorHandle op;
  std::string name; ///< "aten::add.Tensor"
  std::vector<Arg> args;
};

/// An argument that names refs inside a structure (Tensor[], Tensor?[],
/// optional refs): converted on the stream.
struct ComplexArg {
  plan::Value value;
  const OpInfo::Arg *arg;
  RefCells cells;
};

/// One argument of a compiled ATen call.
struct Slot {
  enum Kind : uint8_t { Constant, Ref, Complex };
  Kind kind = Constant;
  uint32_t index = 0; ///< Ref: operand index
  int64_t ref = 0;    ///< Ref: for messages
  c10::IValue constant;
  /// Shared so a compiled call can be copied (kept in a vector).
  std::shared_ptr<ComplexArg> complex;
};

/// A ref an ATen call touches. Operands are numbered: Ref slots in argument
/// order, refs inside complex arguments, then results.
struct Operand {
  int64_t ref;
  bool mutated = false;
  bool result = false;
  int complexSlot = -1; ///< inside that slot's complex argument
};
using Operands = c10::SmallVector<Operand, 6>;

/// An ATen call with its arguments bound; refs are operand indexes, resolved
/// to cells through a frame when run.
struct CompiledOp {
  const OpInfo *op = nullptr;
  c10::SmallVector<Slot, 4> slots;
  c10::SmallVector<uint32_t, 2> results;
  c10::SmallVector<uint32_t, 3> outputs; ///< results + mutated operands
};

/// The static (submit-time) state of a ref on this rank.
struct RefState {
  int64_t stream = 0;
  int64_t mutableBorrow = -1; ///< borrow holding it mutably
  int64_t sharedBorrow = -1;  ///< latest read-only borrow of it
  int sharedBorrows = 0;
  int64_t borrowOf = -1; ///< this ref is the result of that borrow
  Cell *cell = nullptr;
};

enum class BorrowPhase { Created, FirstUse, LastUse, Dropped };

/// Runtime half of a borrow, shared by the two streams' tasks.
struct BorrowSync {
  Event created;  ///< origin stream reached the borrow
  Event lastUse;  ///< receiving stream is done with it
  RefValue value; ///< written before `created` is signalled
  /// For CUDA tensors (DESIGN.md §6.4), in addition to the host events:
  /// recorded on the origin's CUDA stream at create (before `created` is
  /// signalled) and waited on by the receiver's at first use; recorded on
  /// the receiver's at last use (before `lastUse`) and waited on by the
  /// origin's at drop. The host events order the tasks; these order the
  /// kernels the tasks launched.
  std::shared_ptr<DeviceEvent> createdOnDevice, lastUseOnDevice;
  /// Set by the receiver's first use (its thread only): the value is a
  /// CUDA tensor it waited for on the device, so its last use records.
  bool receiverOnDevice = false;
};

/// The CUDA stream of `ctx` when `v` is a CUDA tensor, else null. A stream
/// that has not used CUDA yet makes its CUDA stream current first: ordering a
/// CUDA tensor's kernels needs it, whoever made the tensor.
DeviceStream *deviceFor(const StreamContext &ctx, const RefValue &v) {
  if (!v.tensor.defined() || !v.tensor.is_cuda())
    return nullptr;
  if (ctx.device || !ctx.useDevice)
    return ctx.device;
  return ctx.useDevice();
}

struct Borrow {
  int64_t id, input, result, from, to;
  bool isMutable;
  int64_t createdBy;
  BorrowPhase phase = BorrowPhase::Created;
  std::shared_ptr<BorrowSync> sync = std::make_shared<BorrowSync>();
};

/// What the CUDA graphs of one executor share: the bound on live graphs
/// and the counters Executor::cudaGraphStats() reads.
struct GraphCounters {
  std::atomic<int64_t> graphs{0}, captures{0}, replays{0}, refused{0},
      poolBytes{0};
};

/// How a graph replay binds one of its segment's outputs to its cell.
struct GraphOutput {
  enum Kind : uint8_t {
    Own,       ///< the graph's buffer (a local) or a clone of it (a result)
    Input,     ///< the caller's tensor: an in-place op's returned self
    InputView, ///< a view of the caller's tensor (`w.t()`, `x.detach()`)
    Shared,    ///< a view of a clone of RecordingGraphs::Segment::shared
  };
  Kind kind = Own;
  size_t source = 0; ///< Input, InputView: the input; Shared: the base
  /// InputView, Shared: the view, its offset relative to the source's.
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;

  at::Tensor viewOf(const at::Tensor &base) const {
    return base.as_strided(sizes, strides, base.storage_offset() + offset);
  }
};

/// The CUDA graphs of one compiled recording (docs/plan.md, "CUDA
/// graphs"): its body split by segmentBody() once, at DefineRecording, and
/// per captured segment the state of its graph. Used only by the thread of
/// the recording's stream (one recording, one stream).
struct RecordingGraphs {
  struct Segment {
    GraphSegment plan;
    std::string traceName; ///< "cuda_graph <first>..<last>"
    /// Warming: run op by op until `warmCalls` calls with the same input
    /// shapes ran clean; Captured: replayed while the shapes stay; Off:
    /// op by op for good.
    enum class State { Warming, Captured, Off } state = State::Warming;
    int warmCalls = 0, captures = 0;
    std::vector<int64_t> signature; ///< of the inputs (inputSignature)
    /// Where each input's data was at the last warm call (null: a CPU
    /// scalar): an input found at the same place when captured is pinned.
    std::vector<const void *> warmPointers;
    /// Inputs a replay found moved (the allocator put the warm call's and
    /// the capture's at one place by chance): copied in from then on.
    std::vector<bool> moves;
    std::unique_ptr<DeviceGraph> graph;
    /// The graph's fixed buffers: plan.inputs' and plan.outputs' order. A
    /// pinned input has none: the graph reads the caller's tensor where it
    /// was at the capture (pinnedAt, null for the others, which are copied
    /// in), and a replay needs it there.
    std::vector<at::Tensor> inputs, outputs;
    std::vector<const void *> pinnedAt;
    /// Results (they outlive the call) are lent: bound to the graph's own
    /// buffers, as locals are, if no one holds them by the next replay
    /// (lentResultsReleased); one still held then is copied out from the
    /// next capture on (keepsResult).
    std::vector<bool> outputIsResult, keepsResult;
    /// How a replay binds each output (plan.outputs' order).
    std::vector<GraphOutput> bindings;
    /// Flat tensors over the pool storages that several outputs view where
    /// one of them is a result (GraphOutput::Shared): cloned once per
    /// replay, so the outputs share the copy as they shared the buffer.
    std::vector<at::Tensor> shared;
    /// The inputs (indexes into `inputs`) copied back after a replay: the
    /// plan's writtenInputs, and those the capture saw written through a
    /// view (`x[0].add_(1)`).
    std::vector<size_t> copyBack;
    std::shared_ptr<GraphCounters> counters;

    void drop() {
      if (graph) {
        counters->graphs -= 1;
        counters->poolBytes -= graph->poolBytes();
      }
      graph.reset();
      inputs.clear();
      outputs.clear();
      pinnedAt.clear();
      bindings.clear();
      shared.clear();
    }
    ~Segment() { drop(); }
    Segment() = default;
    Segment(Segment &&) = default;
  };
  std::vector<Segment> segments;
};

/// A recording body compiled once at DefineRecording: possible when it is
/// plain ATen calls and ref deletions on one stream and one mesh, using
/// only refs it defined or its formals. Anything else is expanded call by
/// call (which also reports the errors of a body that cannot run).
struct CompiledRecording {
  struct Step {
    int64_t id;
    std::string location;
    std::string_view name;
    CompiledOp op; ///< unless a deletion
    bool isDelete = false;
    c10::SmallVector<uint32_t, 2> frees; ///< frame indexes a deletion clears
  };
  int64_t id = 0; ///< of the recording (of a stretch: the one it is in)
  int64_t stream = 0;
  int64_t mesh = 0;
  /// A stretch outlined from a recording's body (OutlineStretches.h): its
  /// failures read as the body's own instructions'.
  bool stretch = false;
  size_t formals = 0, results = 0, locals = 0;
  std::vector<bool> formalWritten;
  std::vector<Step> steps; ///< contiguous: walked once per call
  /// Set when the plan marks the recording a CUDA-graph candidate and this
  /// worker has a GPU and graphs on; its stream's thread runs it so.
  std::shared_ptr<RecordingGraphs> graphs;
};

int64_t mixedRank(const mesh::MeshView &view,
                  const std::vector<int64_t> &coords,
                  const std::vector<std::string> &dims) {
  int64_t value = 0;
  for (const auto &d : dims) {
    size_t i = *view.find(d);
    value = value * view.dims()[i].size + coords[i];
  }
  return value;
}

/// True when `v` holds a constant tensor (as the frontend records a wrapped
/// scalar: `x * 0.5` is `mul.Tensor` by a 0-d tensor).
bool hasTensorConstant(const plan::Value &v) {
  switch (v.kind_case()) {
  case plan::Value::kTensor:
    return true;
  case plan::Value::kList:
    for (const auto &e : v.list().values())
      if (hasTensorConstant(e))
        return true;
    return false;
  case plan::Value::kOptional:
    return v.optional().has_value() && hasTensorConstant(v.optional().value());
  default:
    return false;
  }
}

/// True when `call` passes a tensor constant where its schema lets the op
/// write the argument or return an alias of it. A compiled recording converts
/// each constant once and shares it between calls (a CUDA graph bakes it in),
/// where expansion converts it anew for each call: the same as long as no op
/// can change it or hand it on as a result.
bool aliasesTensorConstant(const plan::CallOp &call, const OpInfo &info) {
  const c10::FunctionSchema &schema = info.op.schema();
  for (int i = 0; i < call.args_size(); ++i)
    if (info.args[i].aliased && hasTensorConstant(call.args(i)))
      return true;
  for (const auto &kw : call.kwargs()) {
    auto idx = schema.argumentIndexWithName(kw.name());
    if (idx && info.args[*idx].aliased && hasTensorConstant(kw.value()))
      return true;
  }
  return false;
}

/// Binds an ATen call's returned values (tensors, tensor lists, scalars as
/// 0-d tensors) to `n` result cells, in order. An undefined tensor (a `Tensor`
/// return the op left out, as `native_layer_norm_backward` does for a false
/// output_mask entry, or an undefined element of a `Tensor[]`) keeps its
/// place: its cell gets the error `undefined(k)` returns, which is not
/// reported, so only a use of that result fails (as a dependent error). A
/// `None` binds the same way where `returns` (the schema's returns, when
/// known) says the value is a plain `Tensor`; otherwise (a `Tensor?`) it
/// binds nothing.
template <typename Undefined>
void bindResults(std::vector<c10::IValue> &values, Cell *const *frame,
                 const uint32_t *results, size_t n, Undefined &&undefined,
                 const std::vector<c10::Argument> *returns = nullptr) {
  size_t k = 0;
  auto bind = [&](at::Tensor t) {
    if (k < n) {
      if (t.defined())
        frame[results[k]]->setTensor(std::move(t));
      else
        frame[results[k]]->setError(undefined(k));
    }
    ++k;
  };
  for (size_t i = 0; i < values.size(); ++i) {
    c10::IValue &v = values[i];
    if (v.isTensor())
      bind(std::move(v).toTensor());
    else if (v.isTensorList())
      for (const at::Tensor &t : v.toTensorList())
        bind(t);
    else if (v.isInt())
      bind(at::scalar_tensor(v.toInt(), at::kLong));
    else if (v.isDouble())
      bind(at::scalar_tensor(v.toDouble(), at::kDouble));
    else if (v.isBool())
      bind(at::scalar_tensor(v.toBool(), at::kBool));
    else if (v.isNone()) {
      if (returns && i < returns->size() &&
          (*returns)[i].type()->kind() == c10::TypeKind::TensorType)
        bind(at::Tensor());
    } else
      throw std::runtime_error("cannot bind a result of type " + v.tagKind());
  }
  if (k < n)
    throw std::runtime_error("produced " + std::to_string(k) +
                             " tensors but the instruction binds " +
                             std::to_string(n) + " results");
}

/// Runs a compiled ATen call; refs resolve through `frame`.
template <typename Undefined>
void invoke(const CompiledOp &c, Cell *const *frame,
            std::vector<c10::IValue> &stack, Undefined &&undefined) {
  stack.clear();
  for (const Slot &s : c.slots) {
    switch (s.kind) {
    case Slot::Constant:
      stack.push_back(s.constant);
      break;
    case Slot::Ref: {
      const Cell &cell = *frame[s.index];
      if (cell.value.error)
        throw DependentError{cell.value.error};
      if (!cell.bound)
        throw std::runtime_error("ref " + std::to_string(s.ref) +
                                 " has no value on this rank");
      stack.emplace_back(cell.value.tensor);
      break;
    }
    case Slot::Complex: {
      const RefCells &cells = s.complex->cells;
      stack.push_back(toIValue(s.complex->value, s.complex->arg->type,
                               s.complex->arg->fixedSize,
                               [&](int64_t r) { return cells.tensor(r); }));
      break;
    }
    }
  }
  c.op->op.callBoxed(&stack);
  bindResults(stack, frame, c.results.data(), c.results.size(), undefined,
              &c.op->op.schema().returns());
  stack.clear();
}

/// The message of the error bound to result `k` of `op` when the op
/// returned no tensor (an undefined tensor) in that place.
std::string undefinedResult(const std::string &op, size_t k) {
  return op + " returned no tensor for result " + std::to_string(k) +
         " (an undefined tensor, e.g. for a false output_mask entry)";
}

void bindError(Cell *const *frame, const uint32_t *outputs, size_t n,
               const ErrorPtr &e) {
  for (size_t k = 0; k < n; ++k)
    frame[outputs[k]]->setError(e);
}

std::string recordingWhere(int64_t recording, int64_t call,
                           const std::string &location) {
  return " (recording " + std::to_string(recording) +
         ", called by instruction " + std::to_string(call) +
         (location.empty() ? "" : " at " + location) + ")";
}

/// Where a body instruction of a loop's iteration `k` ran, after its own
/// location.
std::string loopWhere(int64_t recording, int64_t loop, int64_t k,
                      const std::string &location) {
  return " (recording " + std::to_string(recording) + ", iteration " +
         std::to_string(k) + " of loop instruction " + std::to_string(loop) +
         (location.empty() ? "" : " at " + location) + ")";
}

} // namespace

struct Executor::Impl {
  Impl(ExecutorOptions opts, ExecutorCallbacks cbs)
      : options(std::move(opts)), callbacks(std::move(cbs)),
        device(workerDevice(options.rank)) {
    if (device >= 0)
      setProcessDevice(device);
    if (!options.health)
      options.health = std::make_shared<PeerHealth>();
    if (options.intraOpThreads > 0)
      at::set_num_threads(options.intraOpThreads);
    if (!options.rootShape.empty())
      setRoot(options.rootShape);
    if (options.memoryCapBytes)
      setMemoryCap(options.memoryCapBytes);
    if (callbacks.onTrace)
      traceSink = [this](int64_t instruction, int64_t stream,
                         std::string_view name, int64_t recording,
                         int64_t start, int64_t end, bool onDevice) {
        plan::TraceEvent event;
        event.set_instruction(instruction);
        event.set_stream(stream);
        event.set_name(name.data(), name.size());
        event.set_start_ns(start);
        event.set_end_ns(end);
        event.set_recording(recording);
        event.set_on_device(onDevice);
        std::lock_guard<std::mutex> lock(callbackMutex);
        callbacks.onTrace(event);
      };
    addQueue(0, "default");
  }

  ~Impl() {
    flush();
    streams.clear(); // join stream threads before the state they use goes
    if (options.memoryCapBytes)
      setMemoryCap(0);
  }

  /// A stream: its thread, and the tasks submitted but not yet handed over.
  struct Stream {
    std::unique_ptr<SerialQueue> queue;
    TaskBatch batch;
    uint64_t pushed = 0; ///< tasks ever submitted to it
    /// Cells of deleted refs, reusable once the stream has run that many
    /// tasks (the task clearing them and every earlier use).
    std::deque<std::pair<uint64_t, Cell *>> retired;
  };

  // --- queues and cells ------------------------------------------------------

  void addQueue(int64_t id, std::string name) {
    Stream s;
    const TraceSink *trace = traceSink ? &traceSink : nullptr;
    s.queue = std::make_unique<SerialQueue>(
        std::move(name), id, trace, makeDeviceStream(device, trace, id));
    streams.emplace(id, std::move(s));
  }

  Stream &stream(int64_t id) {
    auto it = streams.find(id);
    return it == streams.end() ? streams.at(0) : it->second;
  }

  void push(Stream &s, TaskPtr task) {
    s.batch.push_back(std::move(task));
    ++s.pushed;
  }

  /// Sets what a trace event of `task` reports.
  TaskPtr traced(TaskPtr task, const plan::Instruction &inst,
                 std::string_view name) {
    task->instruction = inst.id();
    task->recording = expanding;
    task->name = name;
    return task;
  }

  /// Hands every stream its submitted tasks.
  void flush() {
    for (auto &[id, s] : streams)
      s.queue->push(s.batch);
  }

  Cell *allocCell() {
    if (freeCells.empty())
      for (auto &[id, s] : streams) {
        uint64_t done = s.queue->completed();
        while (!s.retired.empty() && s.retired.front().first <= done) {
          freeCells.push_back(s.retired.front().second);
          s.retired.pop_front();
        }
      }
    if (freeCells.empty())
      return &cellStore.emplace_back();
    Cell *c = freeCells.back();
    freeCells.pop_back();
    return c;
  }

  /// Clears `cells` on `s` and recycles them once that has run.
  using CellList = c10::SmallVector<Cell *, 4>;

  void release(Stream &s, CellList cells, const plan::Instruction *inst) {
    if (cells.empty() && !inst)
      return;
    // Cells inline: deleting a ref or two costs one allocation.
    TaskPtr task = makeTask([cells](StreamContext &) {
      for (Cell *c : cells)
        c->clear();
    });
    if (inst)
      task = traced(std::move(task), *inst, kindName(*inst));
    push(s, std::move(task));
    for (Cell *c : cells)
      s.retired.emplace_back(s.pushed, c);
  }

  // --- reporting -------------------------------------------------------------

  void report(const ErrorRecord &e) {
    std::lock_guard<std::mutex> lock(callbackMutex);
    if (!callbacks.onFailure)
      return;
    plan::Failure f;
    f.set_instruction(e.instruction);
    f.set_rank(e.rank);
    f.set_message(e.message);
    f.set_location(e.location);
    if (e.failedRank >= 0) {
      f.set_supervision(true);
      f.set_failed_rank(e.failedRank);
    }
    callbacks.onFailure(f);
  }

  ErrorPtr rootError(int64_t id, const std::string &location,
                     const std::string &message) {
    auto e = std::make_shared<ErrorRecord>(
        ErrorRecord{id, options.rank, message, location});
    report(*e);
    return e;
  }

  ErrorPtr rootError(const InstInfo &info, const std::string &message) {
    return rootError(info.id, info.location, message);
  }

  /// A root failure caused by rank `failed`'s process, not by the op.
  ErrorPtr procError(const InstInfo &info, const std::string &message,
                     int64_t failed) {
    auto e = std::make_shared<ErrorRecord>(
        ErrorRecord{info.id, options.rank, message, info.location, failed});
    report(*e);
    return e;
  }

  /// Runs `body` as one instruction: an errored input makes `outputs`
  /// dependent errors; an exception makes them point at a new root failure.
  template <typename Body>
  void execute(const InstInfo &info, const std::vector<Cell *> &outputs,
               Body &&body) {
    auto bind = [&](const ErrorPtr &e) {
      for (Cell *c : outputs)
        c->setError(e);
    };
    try {
      body();
    } catch (const DependentError &d) {
      bind(d.root);
    } catch (const std::exception &e) {
      bind(rootError(info, errorMessage(e)));
    } catch (...) {
      bind(rootError(info, "unknown exception"));
    }
  }

  /// execute() for a compiled ATen call; `where()` gives its location (built
  /// only on failure).
  template <typename Where>
  void runOp(int64_t id, Where &&where, const CompiledOp &op,
             Cell *const *frame, std::vector<c10::IValue> &stack) {
    const uint32_t *outputs = op.outputs.data();
    size_t n = op.outputs.size();
    // A result the op left undefined: an unreported error naming this
    // instruction, so a use of it fails as a dependent error.
    auto undefined = [&](size_t k) -> ErrorPtr {
      return std::make_shared<const ErrorRecord>(
          ErrorRecord{id, options.rank, undefinedResult(op.op->name, k),
                      std::string(where())});
    };
    try {
      invoke(op, frame, stack, undefined);
      return;
    } catch (const DependentError &d) {
      stack.clear();
      bindError(frame, outputs, n, d.root);
    } catch (const std::exception &e) {
      stack.clear();
      bindError(frame, outputs, n, rootError(id, where(), errorMessage(e)));
    } catch (...) {
      stack.clear();
      bindError(frame, outputs, n, rootError(id, where(), "unknown exception"));
    }
  }

  // --- static state ----------------------------------------------------------

  void setRoot(const std::vector<std::pair<std::string, int64_t>> &shape) {
    auto view = mesh::MeshView::root(shape);
    if (!view.ok())
      throw std::invalid_argument("invalid root mesh: " + view.error().message);
    meshes.erase(0);
    meshes.emplace(0, view.value());
    membership[0] = view.value().contains(options.rank);
  }

  Status addMesh(const plan::Mesh &m) {
    auto view = meshViewOf(m);
    if (!view.ok())
      return view.status();
    meshes.erase(m.id());
    meshes.emplace(m.id(), view.value());
    membership[m.id()] = view.value().contains(options.rank);
    return Status();
  }

  Status addStream(const plan::Stream &s) {
    if (streams.count(s.id()))
      return Status(ErrorCode::Invalid,
                    "stream " + std::to_string(s.id()) + " already exists");
    addQueue(s.id(),
             s.name().empty() ? "stream" + std::to_string(s.id()) : s.name());
    return Status();
  }

  std::string streamName(int64_t id) const {
    auto it = streams.find(id);
    return it == streams.end() ? std::to_string(id) : it->second.queue->name();
  }

  const mesh::MeshView *meshOf(int64_t id) const {
    auto it = meshes.find(id);
    return it == meshes.end() ? nullptr : &it->second;
  }

  InstPtr info(const plan::Instruction &inst) {
    return std::make_shared<const InstInfo>(
        InstInfo{inst.id(), inst.stream(), inst.location()});
  }

  /// (Re)defines `ref` as owned by `stream`; returns its cell. A ref
  /// redefined on another stream gets a new cell: the old one may still be
  /// in use on its stream.
  Cell *define(int64_t ref, int64_t streamId) {
    auto [it, inserted] = refs.emplace(ref, RefState());
    RefState &st = it->second;
    Cell *cell = st.cell;
    if (!inserted && st.stream != streamId) {
      release(stream(st.stream), {cell}, nullptr);
      cell = nullptr;
    }
    if (!cell)
      cell = allocCell();
    st = RefState();
    st.stream = streamId;
    st.cell = cell;
    if (!dropped.empty())
      dropped.erase(ref);
    return cell;
  }

  /// The cell of `ref` when it is owned by `stream`, else null.
  Cell *cellOn(int64_t ref, int64_t streamId) {
    auto it = refs.find(ref);
    return it == refs.end() || it->second.stream != streamId ? nullptr
                                                             : it->second.cell;
  }

  /// Removes `ref` from the static state and frees its value on its stream.
  void forget(int64_t ref, const plan::Instruction *inst = nullptr) {
    auto it = refs.find(ref);
    if (it == refs.end())
      return;
    Cell *cell = it->second.cell;
    int64_t owner = it->second.stream;
    refs.erase(it);
    release(stream(owner), {cell}, inst);
  }

  /// Fails an instruction before it runs; its outputs become errors.
  void failStatic(const plan::Instruction &inst, const std::string &message,
                  const std::vector<int64_t> &outputs) {
    int64_t sid = streams.count(inst.stream()) ? inst.stream() : 0;
    auto error = std::make_shared<ErrorRecord>(
        ErrorRecord{inst.id(), options.rank, message, inst.location()});
    std::vector<Cell *> mine;
    for (int64_t r : outputs) {
      auto it = refs.find(r);
      if (it == refs.end()) {
        mine.push_back(define(r, sid));
      } else if (it->second.stream == sid) {
        mine.push_back(it->second.cell);
      } else {
        // Owned by another stream: bind the error there, in its order.
        Cell *c = it->second.cell;
        push(stream(it->second.stream),
             makeTask([c, error](StreamContext &) { c->setError(error); }));
      }
    }
    push(stream(sid), traced(makeTask([this, error, mine](StreamContext &) {
                               report(*error);
                               for (Cell *c : mine)
                                 c->setError(error);
                             }),
                             inst, kindName(inst)));
  }

  /// Empty when `ref` may be used (`write`: mutated) on `stream`.
  std::string checkUse(int64_t ref, int64_t streamId, bool write) {
    auto it = refs.find(ref);
    if (it == refs.end()) {
      auto d = dropped.find(ref);
      if (d != dropped.end())
        return d->second;
      return "ref " + std::to_string(ref) + " is not defined on rank " +
             std::to_string(options.rank);
    }
    RefState &st = it->second;
    if (st.stream != streamId)
      return "WRONG_STREAM: ref " + std::to_string(ref) +
             " belongs to stream '" + streamName(st.stream) +
             "' but is used on stream '" + streamName(streamId) + "'";
    if (st.mutableBorrow >= 0)
      return "BORROWED: ref " + std::to_string(ref) +
             " is mutably borrowed by borrow " +
             std::to_string(st.mutableBorrow) + " (stream '" +
             streamName(borrows.at(st.mutableBorrow).to) +
             "') and cannot be used until the borrow is dropped";
    if (st.borrowOf >= 0) {
      Borrow &b = borrows.at(st.borrowOf);
      if (b.phase == BorrowPhase::LastUse)
        return "ref " + std::to_string(ref) +
               " is used after the last use of "
               "borrow " +
               std::to_string(b.id);
      if (write && !b.isMutable)
        return "ref " + std::to_string(ref) +
               " would be mutated but it is a read-only borrow (borrow " +
               std::to_string(b.id) + ")";
      if (b.phase == BorrowPhase::Created)
        firstUse(b, nullptr);
    }
    if (write && st.sharedBorrows > 0)
      return "ref " + std::to_string(ref) +
             " would be mutated while it is borrowed read-only (borrow " +
             std::to_string(st.sharedBorrow) + ")";
    return "";
  }

  // --- instructions ----------------------------------------------------------

  bool isMember(const plan::Instruction &inst) {
    if (inst.kind_case() == plan::Instruction::kSendTensor) {
      const auto *src = meshOf(inst.send_tensor().source_mesh());
      const auto *dst = meshOf(inst.send_tensor().dest_mesh());
      return (src && src->contains(options.rank)) ||
             (dst && dst->contains(options.rank));
    }
    // Cached: MeshView::contains allocates (coordinates), per instruction.
    auto it = membership.find(inst.mesh());
    return it == membership.end() || it->second; // unknown mesh: fail loudly
  }

  std::vector<int64_t> definedRefs(const plan::Instruction &inst) {
    std::vector<int64_t> out;
    visitRefs(inst, [&](int64_t r, RefRole role) {
      if (role == RefRole::Define || role == RefRole::Write)
        out.push_back(r);
    });
    return out;
  }

  /// Never throws: a bug in the static part of an instruction (a lookup
  /// that should not fail, a malformed plan that validation missed) fails
  /// that instruction instead of ending the worker.
  void submit(const plan::Instruction &inst) {
    std::string what;
    try {
      submitChecked(inst);
      return;
    } catch (const std::exception &e) {
      what = errorMessage(e);
    } catch (...) {
      what = "unknown exception";
    }
    try {
      failStatic(inst,
                 "internal error in " + std::string(kindName(inst)) + ": " +
                     what,
                 definedRefs(inst));
    } catch (...) {
      std::fprintf(stderr, "monarch: instruction %lld: internal error: %s\n",
                   static_cast<long long>(inst.id()), what.c_str());
    }
  }

  void submitChecked(const plan::Instruction &inst) {
    switch (inst.kind_case()) {
    case plan::Instruction::kCreateMesh:
      if (Status s = addMesh(inst.create_mesh().mesh()); !s.isOk())
        failStatic(inst, s.message(), {});
      return;
    case plan::Instruction::kCreateStream:
      if (Status s = addStream(inst.create_stream().stream()); !s.isOk())
        failStatic(inst, s.message(), {});
      return;
    case plan::Instruction::kDefineRecording: {
      const plan::Recording &rec = inst.define_recording().recording();
      Recording &r = recordings[rec.id()];
      r.plan = rec;
      r.stretches = nullptr;
      r.compiled = compileRecording(rec);
      if (!r.compiled && rec.cuda_graph())
        outline(r);
      if (graphCandidate(rec) && !(r.compiled && r.compiled->graphs) &&
          !r.stretches)
        debug("cuda graphs: recording " + std::to_string(rec.id()) +
              (r.compiled ? " has no stretch of " +
                                std::to_string(options.cudaGraphMinOps) +
                                " ATen calls to capture"
                          : " is not plain ATen calls on one stream: it runs "
                            "expanded, op by op"));
      return;
    }
    case plan::Instruction::kCallRecording:
      callRecording(inst);
      return;
    case plan::Instruction::kLoop:
      loop(inst);
      return;
    case plan::Instruction::KIND_NOT_SET:
      failStatic(inst, "instruction has no kind", {});
      return;
    default:
      break;
    }
    if (!isMember(inst))
      return;
    if (!meshOf(inst.mesh()) &&
        inst.kind_case() != plan::Instruction::kSendTensor)
      return failStatic(inst, "unknown mesh " + std::to_string(inst.mesh()),
                        definedRefs(inst));
    if (!streams.count(inst.stream()))
      return failStatic(inst, "unknown stream " + std::to_string(inst.stream()),
                        definedRefs(inst));
    switch (inst.kind_case()) {
    case plan::Instruction::kRankTensor:
      return rankTensor(inst);
    case plan::Instruction::kCallOp:
      return callOp(inst);
    case plan::Instruction::kCallFunction:
      return callFunction(inst);
    case plan::Instruction::kCallActor:
      return callActor(inst);
    case plan::Instruction::kReduce:
      return reduce(inst);
    case plan::Instruction::kSendTensor:
      return send(inst);
    case plan::Instruction::kBorrowCreate:
      return borrowCreate(inst);
    case plan::Instruction::kBorrowFirstUse:
    case plan::Instruction::kBorrowLastUse:
    case plan::Instruction::kBorrowDrop:
      return borrowStep(inst);
    case plan::Instruction::kDeleteRefs:
      return deleteRefs(inst);
    case plan::Instruction::kFetch:
      return fetch(inst);
    case plan::Instruction::kRequestStatus:
      return requestStatus(inst);
    default:
      return failStatic(
          inst, std::string("unsupported instruction ") + kindName(inst),
          definedRefs(inst));
    }
  }

  void rankTensor(const plan::Instruction &inst) {
    const auto &rt = inst.rank_tensor();
    const mesh::MeshView &view = *meshOf(inst.mesh());
    std::vector<std::string> dims(rt.dims().begin(), rt.dims().end());
    if (dims.empty())
      dims = view.names();
    for (const auto &d : dims)
      if (!view.find(d))
        return failStatic(
            inst, "unknown dim '" + d + "' of mesh " + view.shapeString(),
            {rt.result()});
    int64_t value = mixedRank(view, *view.coordsOf(options.rank), dims);
    Cell *cell = define(rt.result(), inst.stream());
    InstPtr i = info(inst);
    push(stream(inst.stream()),
         traced(makeTask([this, i, value, cell](StreamContext &) {
                  execute(*i, {cell}, [&] {
                    cell->setTensor(at::scalar_tensor(value, at::kLong));
                  });
                }),
                inst, kindName(inst)));
  }

  // --- ATen calls ------------------------------------------------------------

  /// The digested schema of `call`'s operator, cached for the executor's
  /// lifetime; null (with `error`) when there is no such operator.
  const OpInfo *findOp(const plan::CallOp &call, std::string &error) {
    // Reused buffer: most "aten::op.overload" names are past the small
    // string size and this runs once per instruction.
    opKey.assign(call.name());
    if (!call.overload().empty())
      opKey.append(".").append(call.overload());
    auto it = ops.find(opKey);
    if (it != ops.end())
      return it->second.get();
    auto handle = c10::Dispatcher::singleton().findSchema(
        c10::OperatorName(call.name(), call.overload()));
    if (!handle) {
      error = "unknown operator " + opKey;
      return nullptr;
    }
    auto op = std::make_unique<OpInfo>(OpInfo{*handle, opKey, {}});
    for (const c10::Argument &arg : handle->schema().arguments()) {
      OpInfo::Arg a;
      a.type = arg.type();
      a.fixedSize = arg.N() ? *arg.N() : 0;
      a.isTensor = a.type->kind() == c10::TypeKind::TensorType;
      a.mutated = arg.alias_info() && arg.alias_info()->isWrite();
      a.aliased = arg.alias_info() != nullptr;
      op->args.push_back(std::move(a));
    }
    return ops.emplace(opKey, std::move(op)).first->second.get();
  }

  /// Binds `call`'s arguments against its schema: constants converted,
  /// refs numbered as operands. False (with `error`) for a bad call.
  bool compileOp(const plan::CallOp &call, CompiledOp &out, Operands &operands,
                 std::string &error) {
    const OpInfo *info = findOp(call, error);
    if (!info)
      return false;
    out.op = info;
    const c10::FunctionSchema &schema = info->op.schema();
    size_t nargs = info->args.size();
    if (static_cast<size_t>(call.args_size()) > nargs) {
      error = info->name + " takes " + std::to_string(nargs) +
              " arguments but " + std::to_string(call.args_size()) +
              " were given";
      return false;
    }
    c10::SmallVector<const plan::Value *, 8> bound(nargs, nullptr);
    for (int i = 0; i < call.args_size(); ++i)
      bound[i] = &call.args(i);
    for (const auto &kw : call.kwargs()) {
      auto idx = schema.argumentIndexWithName(kw.name());
      if (!idx) {
        error = info->name + " has no argument '" + kw.name() + "'";
        return false;
      }
      bound[*idx] = &kw.value();
    }
    out.slots.resize(nargs);
    for (size_t i = 0; i < nargs; ++i) {
      const OpInfo::Arg &a = info->args[i];
      Slot &slot = out.slots[i];
      if (!bound[i]) {
        const auto &def = schema.arguments()[i].default_value();
        if (!def) {
          error = info->name + ": missing argument '" +
                  schema.arguments()[i].name() + "'";
          return false;
        }
        slot.constant = *def;
      } else if (isConstant(*bound[i])) {
        try {
          slot.constant = toIValue(*bound[i], a.type, a.fixedSize, noRefs);
        } catch (const std::exception &e) {
          error = info->name + ": argument '" + schema.arguments()[i].name() +
                  "': " + errorMessage(e);
          return false;
        }
      } else if (bound[i]->kind_case() == plan::Value::kRef && a.isTensor) {
        // The common case, resolved to a cell at submit time.
        slot.kind = Slot::Ref;
        slot.ref = bound[i]->ref();
        slot.index = static_cast<uint32_t>(operands.size());
        operands.push_back(Operand{slot.ref, a.mutated});
        if (a.mutated)
          out.outputs.push_back(slot.index);
      } else {
        slot.kind = Slot::Complex;
        slot.complex =
            std::make_shared<ComplexArg>(ComplexArg{*bound[i], &a, {}});
        visitValueRefs(*bound[i], RefRole::Read, [&](int64_t r, RefRole) {
          if (a.mutated)
            out.outputs.push_back(static_cast<uint32_t>(operands.size()));
          operands.push_back(Operand{r, a.mutated, false, static_cast<int>(i)});
        });
      }
    }
    for (int64_t r : call.results()) {
      auto k = static_cast<uint32_t>(operands.size());
      operands.push_back(Operand{r, false, true});
      out.results.push_back(k);
      out.outputs.push_back(k);
    }
    return true;
  }

  /// A queued ATen call: one allocation with everything it needs.
  struct CallTask final : Task {
    Impl *impl;
    CompiledOp op;
    c10::SmallVector<Cell *, 6> frame; ///< operand cells
    std::string location;

    void run(StreamContext &ctx) override {
      impl->runOp(
          instruction, [&]() -> const std::string & { return location; }, op,
          frame.data(), ctx.stack);
    }
  };

  void callOp(const plan::Instruction &inst) {
    const auto &call = inst.call_op();
    auto task = std::make_unique<CallTask>();
    Operands operands;
    std::string error;
    if (!compileOp(call, task->op, operands, error))
      return failStatic(inst, error,
                        {call.results().begin(), call.results().end()});
    for (const Operand &o : operands)
      if (!o.result)
        if (std::string e = checkUse(o.ref, inst.stream(), o.mutated);
            !e.empty())
          return failStatic(inst, e,
                            {call.results().begin(), call.results().end()});
    task->frame.reserve(operands.size());
    for (const Operand &o : operands)
      task->frame.push_back(o.result ? define(o.ref, inst.stream())
                                     : refs.find(o.ref)->second.cell);
    for (size_t k = 0; k < operands.size(); ++k)
      if (operands[k].complexSlot >= 0)
        task->op.slots[operands[k].complexSlot].complex->cells.add(
            operands[k].ref, task->frame[k]);
    task->impl = this;
    task->location = inst.location();
    std::string_view name = task->op.op->name;
    push(stream(inst.stream()), traced(std::move(task), inst, name));
  }

  /// Shared by CallFunction and CallActor: refs checked, args converted
  /// untyped on the stream.
  void callWith(
      const plan::Instruction &inst,
      const google::protobuf::RepeatedPtrField<plan::Value> &args,
      const google::protobuf::RepeatedField<int64_t> &res,
      std::function<std::vector<at::Tensor>(const std::vector<c10::IValue> &)>
          fn) {
    std::vector<int64_t> results(res.begin(), res.end());
    std::string error;
    std::vector<int64_t> reads;
    visitRefs(inst, [&](int64_t r, RefRole role) {
      if (role == RefRole::Read) {
        reads.push_back(r);
        if (error.empty())
          error = checkUse(r, inst.stream(), false);
      }
    });
    if (!error.empty())
      return failStatic(inst, error, results);
    RefCells cells;
    for (int64_t r : reads)
      cells.add(r, refs.find(r)->second.cell);
    std::vector<Cell *> outputs;
    for (int64_t r : results)
      outputs.push_back(define(r, inst.stream()));
    InstPtr i = info(inst);
    std::vector<plan::Value> argv(args.begin(), args.end());
    std::string what = kindName(inst);
    push(stream(inst.stream()),
         traced(makeTask([this, i, argv, cells, outputs, fn,
                          what](StreamContext &) {
                  execute(*i, outputs, [&] {
                    std::vector<c10::IValue> in;
                    for (const auto &a : argv)
                      in.push_back(toIValue(
                          a, [&](int64_t r) { return cells.tensor(r); }));
                    std::vector<c10::IValue> out;
                    for (auto &t : fn(in))
                      out.emplace_back(std::move(t));
                    std::vector<uint32_t> idx(outputs.size());
                    for (size_t k = 0; k < idx.size(); ++k)
                      idx[k] = static_cast<uint32_t>(k);
                    bindResults(out, outputs.data(), idx.data(), idx.size(),
                                [&](size_t k) -> ErrorPtr {
                                  return std::make_shared<const ErrorRecord>(
                                      ErrorRecord{i->id, options.rank,
                                                  undefinedResult(what, k),
                                                  i->location});
                                });
                  });
                }),
                inst, kindName(inst)));
  }

  void callFunction(const plan::Instruction &inst) {
    const auto &call = inst.call_function();
    TensorFunction fn =
        FunctionRegistry::global().find(call.name(), call.definition());
    if (!fn)
      return failStatic(inst, "no function registered as '" + call.name() + "'",
                        definedRefs(inst));
    callWith(inst, call.args(), call.results(), fn);
  }

  void callActor(const plan::Instruction &inst) {
    const auto &call = inst.call_actor();
    if (!options.actors)
      return failStatic(inst, "no actor bridge attached to this worker",
                        definedRefs(inst));
    auto actors = options.actors;
    auto what = std::make_shared<const plan::CallActor>(call);
    callWith(inst, call.args(), call.results(),
             [actors, what](const std::vector<c10::IValue> &args) {
               return actors->call(*what, args);
             });
  }

  // --- collectives -----------------------------------------------------------

  CollectiveEnv collectiveEnv(const InstPtr &i, const RefCells &cells,
                              StreamContext &ctx) {
    CollectiveEnv env;
    env.rank = options.rank;
    env.stream = i->stream;
    env.backend = options.collectives.get();
    env.cudaBackend = options.cudaCollectives.get();
    env.device = ctx.device;
    env.context = &ctx;
    env.cache = &comms;
    env.table = &cells;
    env.fail = [this, i](const std::string &m) { return rootError(*i, m); };
    env.health = options.health.get();
    env.failProc = [this, i](const std::string &m, int64_t failed) {
      return procError(*i, m, failed);
    };
    return env;
  }

  void reduce(const plan::Instruction &inst) {
    const auto &r = inst.reduce();
    const mesh::MeshView &view = *meshOf(inst.mesh());
    std::vector<int64_t> outputs{r.in_place() ? r.input() : r.result()};
    if (r.has_out())
      outputs.push_back(r.out());
    if (std::string e = checkReduce(r, view); !e.empty())
      return failStatic(inst, e, outputs);
    // A use error on this rank only: still take part, with zeros.
    std::string useError = checkUse(r.input(), inst.stream(), r.in_place());
    if (useError.empty() && r.has_out())
      useError = checkUse(r.out(), inst.stream(), true);
    // Only refs of this stream: the others are not this thread's to touch.
    RefCells cells;
    if (Cell *c = cellOn(r.input(), inst.stream()))
      cells.add(r.input(), c);
    if (r.has_out())
      if (Cell *c = cellOn(r.out(), inst.stream()))
        cells.add(r.out(), c);
    if (!r.in_place())
      cells.add(r.result(), define(r.result(), inst.stream()));
    InstPtr i = info(inst);
    plan::Reduce op = r;
    push(stream(inst.stream()),
         traced(
             makeTask([this, i, op, view, useError, cells](StreamContext &ctx) {
               CollectiveEnv env = collectiveEnv(i, cells, ctx);
               if (!useError.empty())
                 env.inputError = rootError(*i, useError);
               execute(*i, {}, [&] { runReduce(env, op, view); });
             }),
             inst, kindName(inst)));
  }

  void send(const plan::Instruction &inst) {
    const auto &s = inst.send_tensor();
    const auto *src = meshOf(s.source_mesh());
    const auto *dst = meshOf(s.dest_mesh());
    bool amDest = dst && dst->contains(options.rank);
    std::vector<int64_t> outputs;
    if (amDest)
      outputs.push_back(s.result());
    if (!src || !dst)
      return failStatic(inst, "to_mesh between unknown meshes", outputs);
    if (std::string e = checkSend(*src, *dst); !e.empty())
      return failStatic(inst, e, outputs);
    std::string useError;
    RefCells cells;
    if (src->contains(options.rank)) {
      useError = checkUse(s.input(), inst.stream(), false);
      if (Cell *c = cellOn(s.input(), inst.stream()))
        cells.add(s.input(), c);
    }
    if (amDest)
      cells.add(s.result(), define(s.result(), inst.stream()));
    InstPtr i = info(inst);
    plan::SendTensor op = s;
    mesh::MeshView source = *src, dest = *dst;
    push(stream(inst.stream()),
         traced(makeTask([this, i, op, source, dest, useError,
                          cells](StreamContext &ctx) {
                  CollectiveEnv env = collectiveEnv(i, cells, ctx);
                  if (!useError.empty())
                    env.inputError = rootError(*i, useError);
                  execute(*i, {}, [&] { runSend(env, op, source, dest); });
                }),
                inst, kindName(inst)));
  }

  // --- borrows (DESIGN.md §6.4)
  // -----------------------------------------------

  void borrowCreate(const plan::Instruction &inst) {
    const auto &bc = inst.borrow_create();
    std::vector<int64_t> outputs{bc.result()};
    if (borrows.count(bc.borrow()))
      return failStatic(
          inst, "borrow " + std::to_string(bc.borrow()) + " already exists",
          outputs);
    if (bc.from_stream() == inst.stream())
      return failStatic(inst,
                        "cannot borrow onto the stream that owns the "
                        "tensor",
                        outputs);
    if (!streams.count(bc.from_stream()))
      return failStatic(
          inst, "unknown stream " + std::to_string(bc.from_stream()), outputs);
    if (std::string e = checkUse(bc.input(), bc.from_stream(), false);
        !e.empty())
      return failStatic(inst, e, outputs);
    {
      RefState &origin = refs.at(bc.input());
      if (bc.mutable_() && origin.sharedBorrows > 0)
        return failStatic(inst,
                          "cannot borrow ref " + std::to_string(bc.input()) +
                              " mutably: it is borrowed read-only (borrow " +
                              std::to_string(origin.sharedBorrow) + ")",
                          outputs);
      if (origin.borrowOf >= 0 && bc.mutable_() &&
          !borrows.at(origin.borrowOf).isMutable)
        return failStatic(inst,
                          "cannot borrow ref " + std::to_string(bc.input()) +
                              " mutably: it is itself a read-only borrow",
                          outputs);
    }

    Borrow b{bc.borrow(),   bc.input(),    bc.result(), bc.from_stream(),
             inst.stream(), bc.mutable_(), inst.id()};
    {
      RefState &origin = refs.at(bc.input());
      if (b.isMutable) {
        origin.mutableBorrow = b.id;
      } else {
        ++origin.sharedBorrows;
        origin.sharedBorrow = b.id;
      }
    }
    Cell *input = refs.at(b.input).cell;
    define(b.result, b.to);
    refs.at(b.result).borrowOf = b.id;
    auto sync = b.sync;
    borrows.emplace(b.id, std::move(b));
    // The origin stream records the "event" once everything before the
    // borrow on it has run.
    push(stream(bc.from_stream()),
         traced(makeTask([this, sync, input](StreamContext &ctx) {
                  if (input->bound)
                    sync->value = input->value;
                  else
                    sync->value.error =
                        std::make_shared<ErrorRecord>(ErrorRecord{
                            -1, options.rank, "borrowed ref has no value", ""});
                  if (DeviceStream *d = deviceFor(ctx, sync->value)) {
                    try {
                      sync->createdOnDevice = d->record();
                    } catch (const std::exception &e) {
                      sync->value = RefValue{
                          at::Tensor(),
                          std::make_shared<ErrorRecord>(ErrorRecord{
                              -1, options.rank,
                              std::string("cannot record the borrow's CUDA "
                                          "event: ") +
                                  errorMessage(e),
                              ""})};
                    }
                  }
                  sync->created.signal(); // always: the receiver waits on it
                }),
                inst, kindName(inst)));
  }

  /// Created -> FirstUse: the receiving stream waits for the origin's event.
  /// `inst` is null when the first use is implied by a use.
  void firstUse(Borrow &b, const plan::Instruction *inst) {
    b.phase = BorrowPhase::FirstUse;
    auto sync = b.sync;
    Cell *result = refs.at(b.result).cell;
    InstPtr i = std::make_shared<const InstInfo>(InstInfo{
        b.createdBy, b.to, "first use of borrow " + std::to_string(b.id)});
    TaskPtr task = makeTask([this, sync, result, i](StreamContext &ctx) {
      if (!sync->created.wait(options.timeout)) {
        result->setError(rootError(*i, "timed out waiting for the origin "
                                       "stream of the borrow"));
        return;
      }
      if (DeviceStream *d = deviceFor(ctx, sync->value)) {
        try {
          if (sync->createdOnDevice)
            d->wait(*sync->createdOnDevice);
          // Freed on its own stream later, its memory must not go to new
          // work there while this stream's kernels may still read it.
          d->recordUse(sync->value.tensor);
          sync->receiverOnDevice = true;
        } catch (const c10::Error &e) {
          result->setError(rootError(*i, e.what_without_backtrace()));
          return;
        }
      }
      result->set(sync->value);
    });
    if (inst)
      task = traced(std::move(task), *inst, kindName(*inst));
    push(stream(b.to), std::move(task));
  }

  /// FirstUse -> LastUse: the receiving stream is done; signal the origin.
  void lastUse(Borrow &b, const plan::Instruction *inst) {
    if (b.phase == BorrowPhase::Created)
      firstUse(b, nullptr);
    b.phase = BorrowPhase::LastUse;
    auto sync = b.sync;
    Cell *result = refs.at(b.result).cell;
    TaskPtr task = makeTask([sync, result](StreamContext &ctx) {
      result->clear();
      if (sync->receiverOnDevice && ctx.device) {
        try {
          sync->lastUseOnDevice = ctx.device->record();
        } catch (...) {
          // The origin then orders by the host event alone; a CUDA error
          // this severe fails the origin's next kernel anyway.
        }
      }
      sync->lastUse.signal();
    });
    if (inst)
      task = traced(std::move(task), *inst, kindName(*inst));
    push(stream(b.to), std::move(task));
  }

  void borrowStep(const plan::Instruction &inst) {
    int64_t id = inst.has_borrow_first_use()  ? inst.borrow_first_use().borrow()
                 : inst.has_borrow_last_use() ? inst.borrow_last_use().borrow()
                                              : inst.borrow_drop().borrow();
    auto it = borrows.find(id);
    if (it == borrows.end())
      return failStatic(inst, "unknown borrow " + std::to_string(id), {});
    Borrow &b = it->second;
    if (b.phase == BorrowPhase::Dropped)
      return failStatic(
          inst, "borrow " + std::to_string(id) + " was already dropped", {});
    if (inst.has_borrow_first_use()) {
      if (b.phase != BorrowPhase::Created)
        return failStatic(
            inst, "borrow " + std::to_string(id) + " already had its first use",
            {});
      return firstUse(b, &inst);
    }
    if (inst.has_borrow_last_use()) {
      if (b.phase == BorrowPhase::LastUse)
        return failStatic(
            inst, "borrow " + std::to_string(id) + " already had its last use",
            {});
      return lastUse(b, &inst);
    }
    // Drop: the origin stream waits for the receiver's last use.
    if (b.phase != BorrowPhase::LastUse)
      lastUse(b, nullptr);
    b.phase = BorrowPhase::Dropped;
    RefState &origin = refs.at(b.input);
    if (b.isMutable)
      origin.mutableBorrow = -1;
    else
      --origin.sharedBorrows;
    // The last-use task cleared the result's cell on the receiving stream.
    auto res = refs.find(b.result);
    if (res != refs.end()) {
      Stream &to = stream(res->second.stream);
      to.retired.emplace_back(to.pushed, res->second.cell);
      refs.erase(res);
    }
    std::ostringstream msg;
    msg << "DROPPED: ref " << b.result << " was borrow " << b.id
        << ", dropped by instruction " << inst.id();
    if (!inst.location().empty())
      msg << " at " << inst.location();
    dropped[b.result] = msg.str();
    auto sync = b.sync;
    InstPtr i = info(inst);
    push(stream(b.from),
         traced(makeTask([this, sync, i](StreamContext &ctx) {
                  if (!sync->lastUse.wait(options.timeout)) {
                    rootError(*i, "timed out waiting for the last use of the "
                                  "borrow");
                    return;
                  }
                  if (DeviceStream *d = deviceFor(ctx, sync->value))
                    if (sync->lastUseOnDevice) {
                      try {
                        d->wait(*sync->lastUseOnDevice);
                      } catch (const c10::Error &e) {
                        rootError(*i, e.what_without_backtrace());
                      }
                    }
                }),
                inst, kindName(inst)));
  }

  // --- the rest
  // ----------------------------------------------------------------

  void deleteRefs(const plan::Instruction &inst) {
    CellList gone;
    for (int64_t r : inst.delete_refs().refs()) {
      auto it = refs.find(r);
      if (it == refs.end())
        continue; // never defined on this rank (e.g. another mesh's value)
      if (std::string e = checkUse(r, inst.stream(), false); !e.empty()) {
        // The refs already deleted stay deleted.
        release(stream(inst.stream()), std::move(gone), nullptr);
        return failStatic(inst, e, {});
      }
      gone.push_back(it->second.cell);
      refs.erase(it);
    }
    release(stream(inst.stream()), std::move(gone), &inst);
  }

  void fetch(const plan::Instruction &inst) {
    int64_t ref = inst.fetch().ref();
    InstPtr i = info(inst);
    std::string useError = checkUse(ref, inst.stream(), false);
    Cell *cell = useError.empty() ? refs.at(ref).cell : nullptr;
    push(stream(inst.stream()),
         traced(makeTask([this, i, ref, cell, useError](StreamContext &ctx) {
                  plan::FetchReply reply;
                  reply.set_instruction(i->id);
                  reply.set_rank(options.rank);
                  auto setError = [&](const ErrorRecord &e) {
                    auto *f = reply.mutable_error();
                    f->set_instruction(e.instruction);
                    f->set_rank(e.rank);
                    f->set_message(e.message);
                    f->set_location(e.location);
                    if (e.failedRank >= 0) {
                      f->set_supervision(true);
                      f->set_failed_rank(e.failedRank);
                    }
                  };
                  if (!useError.empty()) {
                    setError(*rootError(*i, useError));
                  } else if (!cell->bound) {
                    setError(*rootError(*i, "ref " + std::to_string(ref) +
                                                " has no value on this rank"));
                  } else if (cell->value.error) {
                    setError(*cell->value.error);
                  } else if (deviceFor(ctx, cell->value) &&
                             !ctx.device->synchronize(options.timeout)) {
                    // The copy to CPU below would block on the stream
                    // without a bound; wait for its kernels first.
                    setError(*rootError(
                        *i, "timed out waiting for the GPU work of stream " +
                                std::to_string(ctx.stream)));
                  } else {
                    try {
                      toTensorData(cell->value.tensor, reply.mutable_value());
                      reply.set_source_device(
                          cell->value.tensor.device().str());
                    } catch (const std::exception &e) {
                      setError(*rootError(*i, errorMessage(e)));
                    }
                  }
                  std::lock_guard<std::mutex> lock(callbackMutex);
                  if (callbacks.onFetch)
                    callbacks.onFetch(reply);
                }),
                inst, kindName(inst)));
  }

  void requestStatus(const plan::Instruction &inst) {
    auto remaining = std::make_shared<std::atomic<size_t>>(streams.size());
    int64_t id = inst.id();
    int64_t recording = expanding;
    // One task per stream; the last to run replies and reports the event.
    for (auto &[sid, s] : streams)
      push(s, makeTask([this, remaining, id, recording](StreamContext &ctx) {
             // "Finished" includes the kernels this stream launched.
             if (ctx.device && !ctx.device->synchronize(options.timeout))
               rootError(id, "",
                         "timed out waiting for the GPU work of stream " +
                             std::to_string(ctx.stream));
             if (remaining->fetch_sub(1) != 1)
               return;
             // Host span only: its device span would be empty (the
             // stream has just been synchronized, which also reported this
             // stream's device spans before the status below).
             int64_t start = ctx.trace ? traceNowNs() : 0;
             {
               std::lock_guard<std::mutex> lock(callbackMutex);
               if (callbacks.onStatus)
                 callbacks.onStatus(id);
             }
             if (ctx.trace)
               (*ctx.trace)(id, ctx.stream, "request_status", recording, start,
                            traceNowNs(), false);
           }));
  }

  // --- recordings
  // --------------------------------------------------------------

  /// One outlined stretch: its recording and that compiled.
  struct Stretched {
    plan::Recording plan;
    std::shared_ptr<const CompiledRecording> compiled;
  };
  /// A recording as this worker runs it.
  struct Recording {
    /// The body as defined, or with its stretches outlined (`stretches`).
    plan::Recording plan;
    /// Null when the body must be expanded at each call.
    std::shared_ptr<const CompiledRecording> compiled;
    /// The stretches `plan` calls (call_recording.stretch k is the k-th),
    /// each compiled; null when none was outlined.
    std::shared_ptr<const std::vector<Stretched>> stretches;
  };

  /// A recording marked a CUDA-graph candidate whose body is not one
  /// compiled task (transfers, collectives, borrows among its ATen calls)
  /// gets its long stretches of ATen calls outlined and compiled
  /// (OutlineStretches.h): each call then runs each stretch as one task,
  /// replayed as CUDA graphs on a GPU, and expands only the rest. On the
  /// CPU too: one task per stretch is cheaper than its instructions.
  void outline(Recording &r) {
    const plan::Recording &rec = r.plan;
    std::vector<Stretch> found = findStretches(
        rec, options.cudaGraphMinOps, [&](const plan::Instruction &inst) {
          auto it = membership.find(inst.mesh());
          return it != membership.end() && !it->second;
        });
    std::vector<Stretch> kept;
    auto stretched = std::make_shared<std::vector<Stretched>>();
    for (Stretch &s : found) {
      s.recording.set_id(rec.id());
      s.recording.set_cuda_graph(rec.cuda_graph());
      std::string why;
      std::shared_ptr<const CompiledRecording> cr =
          compileRecording(s.recording, /*stretch=*/true, &why);
      std::string range = "cuda graphs: recording " + std::to_string(rec.id()) +
                          ": instructions " +
                          std::to_string(rec.body(s.begin).id()) + ".." +
                          std::to_string(rec.body(s.end - 1).id());
      if (!cr) {
        debug(range + " not outlined: " + why);
        continue;
      }
      debug(range + " outlined (" + std::to_string(s.ops) + " ATen calls, " +
            (cr->graphs ? "a graph candidate" : "no graph") + ")");
      stretched->push_back({s.recording, std::move(cr)});
      kept.push_back(std::move(s));
    }
    if (kept.empty())
      return;
    r.plan = outlineStretches(rec, kept);
    r.stretches = std::move(stretched);
  }

  /// Compiles `rec`'s body once (see CompiledRecording), or null; `why`,
  /// when given, receives the reason a body is not compiled.
  std::shared_ptr<const CompiledRecording>
  compileRecording(const plan::Recording &rec, bool stretch = false,
                   std::string *why = nullptr) {
    auto refuse = [why](std::string reason) {
      if (why)
        *why = std::move(reason);
      return std::shared_ptr<const CompiledRecording>();
    };
    if (rec.body_size() == 0)
      return refuse("an empty body");
    auto cr = std::make_shared<CompiledRecording>();
    cr->id = rec.id();
    cr->stretch = stretch;
    cr->formals = rec.formals_size();
    cr->results = rec.results_size();
    cr->formalWritten.assign(cr->formals, false);
    const uint32_t fixed = static_cast<uint32_t>(cr->formals + cr->results);
    // Frame index of each ref: formals, results, then locals.
    std::unordered_map<int64_t, uint32_t> index;
    std::vector<bool> defined;
    for (int k = 0; k < rec.formals_size(); ++k) {
      if (!index.emplace(rec.formals(k), k).second)
        return refuse("a formal named twice");
      defined.push_back(true);
    }
    for (int k = 0; k < rec.results_size(); ++k) {
      if (!index.emplace(rec.results(k), cr->formals + k).second)
        return refuse("a result named twice or also a formal");
      defined.push_back(false);
    }
    cr->steps.reserve(rec.body_size());
    std::vector<StepAccess> access; // for the CUDA graphs' segments
    access.reserve(rec.body_size());
    cr->stream = rec.body(0).stream();
    cr->mesh = rec.body(0).mesh();
    for (const auto &body : rec.body()) {
      if (body.stream() != cr->stream || body.mesh() != cr->mesh)
        return refuse("instructions on several meshes or streams");
      CompiledRecording::Step &step = cr->steps.emplace_back();
      StepAccess &touches = access.emplace_back();
      step.id = body.id();
      step.location = body.location();
      step.name = kindName(body);
      if (body.has_delete_refs()) {
        step.isDelete = true;
        for (int64_t r : body.delete_refs().refs()) {
          auto it = index.find(r);
          if (it == index.end() || !defined[it->second])
            continue; // expansion ignores refs it does not hold, too
          if (it->second < fixed)
            return refuse("it deletes a ref of the caller");
          defined[it->second] = false;
          step.frees.push_back(it->second);
        }
        touches.frees.assign(step.frees.begin(), step.frees.end());
      } else if (body.has_call_op()) {
        const auto &call = body.call_op();
        Operands operands;
        std::string error;
        if (!compileOp(call, step.op, operands, error))
          return refuse(error); // expansion reports it at each call
        if (aliasesTensorConstant(call, *step.op.op))
          return refuse(step.op.op->name +
                        " may write or return a tensor constant");
        for (const Slot &slot : step.op.slots)
          if (slot.kind == Slot::Complex)
            return refuse(call.name() +
                          " takes an argument a compiled body cannot hold");
        c10::SmallVector<uint32_t, 6> frame;
        for (const Operand &o : operands) {
          auto it = index.find(o.ref);
          if (!o.result) {
            if (it == index.end() || !defined[it->second])
              return refuse("ref " + std::to_string(o.ref) +
                            " is used before it is defined");
            if (o.mutated && it->second < cr->formals)
              cr->formalWritten[it->second] = true;
            frame.push_back(it->second);
            continue;
          }
          if (it != index.end() && it->second < cr->formals) {
            // An in-place op's returned self bound to the formal it wrote
            // (`x.copy_(y)`, `p.sub_(g)` as the frontend records them): the
            // cell keeps the tensor it holds. Any other rebinding of a
            // caller's ref is expanded (and checked) call by call.
            bool self = std::any_of(
                operands.begin(), operands.end(), [&](const Operand &m) {
                  return !m.result && m.mutated && m.ref == o.ref;
                });
            if (!self)
              return refuse("it rebinds the caller's ref " +
                            std::to_string(o.ref));
            frame.push_back(it->second);
            continue;
          }
          if (it == index.end()) {
            it = index.emplace(o.ref, static_cast<uint32_t>(defined.size()))
                     .first;
            defined.push_back(true);
          }
          defined[it->second] = true;
          frame.push_back(it->second);
        }
        for (size_t k = 0; k < operands.size(); ++k) {
          if (operands[k].result) {
            touches.defines.push_back(frame[k]);
            continue;
          }
          touches.reads.push_back(frame[k]);
          if (operands[k].mutated)
            touches.writes.push_back(frame[k]);
        }
        // Operand indexes -> call frame indexes, once.
        for (Slot &slot : step.op.slots)
          if (slot.kind == Slot::Ref)
            slot.index = frame[slot.index];
        for (uint32_t &k : step.op.results)
          k = frame[k];
        for (uint32_t &k : step.op.outputs)
          k = frame[k];
        step.name = step.op.op->name;
        touches.op = step.name;
      } else {
        return refuse(std::string("a ") + kindName(body) + " instruction");
      }
    }
    for (size_t k = 0; k < cr->results; ++k)
      if (!defined[cr->formals + k])
        return refuse("result " + std::to_string(rec.results(k)) +
                      " is not defined by the body");
    cr->locals = defined.size() - fixed;
    if (graphCandidate(rec))
      cr->graphs = planGraphs(*cr, access);
    return cr;
  }

  /// The plan marks `rec` a CUDA-graph candidate and this worker runs
  /// graphs: it has a GPU and they are on.
  bool graphCandidate(const plan::Recording &rec) const {
    return rec.cuda_graph() && options.cudaGraphs && device >= 0;
  }

  /// The segments of `cr` (segmentBody) and their graphs' empty state; null
  /// when no stretch is long enough to capture.
  std::shared_ptr<RecordingGraphs>
  planGraphs(const CompiledRecording &cr,
             const std::vector<StepAccess> &access) {
    auto graphs = std::make_shared<RecordingGraphs>();
    std::vector<GraphSegment> segments =
        segmentBody(access, options.cudaGraphMinOps);
    graphs->segments.reserve(segments.size());
    bool any = false;
    for (GraphSegment &plan : segments) {
      RecordingGraphs::Segment &seg = graphs->segments.emplace_back();
      seg.counters = graphCounters;
      if (plan.captured) {
        any = true;
        seg.traceName = "cuda_graph " +
                        std::to_string(cr.steps[plan.begin].id) + ".." +
                        std::to_string(cr.steps[plan.end - 1].id);
        for (uint32_t o : plan.outputs)
          seg.outputIsResult.push_back(o >= cr.formals &&
                                       o < cr.formals + cr.results);
        seg.keepsResult.assign(plan.outputs.size(), false);
      }
      seg.plan = std::move(plan);
    }
    return any ? graphs : nullptr;
  }

  /// Steps [begin, end) of a compiled body, op by op; `where(step)` is a
  /// failing step's location.
  template <typename Where>
  void runSteps(StreamContext &ctx, const CompiledRecording &rec,
                Cell *const *cells, size_t begin, size_t end, Where &where) {
    for (size_t k = begin; k < end; ++k) {
      const CompiledRecording::Step &step = rec.steps[k];
      int64_t start = ctx.trace ? traceStart(ctx) : 0;
      if (step.isDelete) {
        for (uint32_t j : step.frees)
          cells[j]->clear();
      } else {
        runOp(step.id, [&] { return where(step); }, step.op, cells,
              ctx.stack);
      }
      if (ctx.trace)
        traceFinish(ctx, step.id, step.name, rec.id, start);
    }
  }

  /// One call of a compiled body over `cells` (`n` of them: formals,
  /// results, locals): op by op, or on a CUDA stream segment by segment,
  /// each captured segment replayed as its graph when this call's inputs
  /// allow it (docs/plan.md, "CUDA graphs").
  template <typename Where>
  void runBody(StreamContext &ctx, const CompiledRecording &rec,
               Cell *const *cells, size_t n, Where &&where) {
    if (!rec.graphs || !ctx.device)
      return runSteps(ctx, rec, cells, 0, rec.steps.size(), where);
    using State = RecordingGraphs::Segment::State;
    for (RecordingGraphs::Segment &seg : rec.graphs->segments) {
      const GraphSegment &plan = seg.plan;
      std::vector<int64_t> signature;
      std::vector<const void *> pointers;
      bool eligible = plan.captured && seg.state != State::Off &&
                      inputSignature(ctx, seg, cells, signature, pointers);
      if (eligible && seg.state == State::Captured) {
        if (signature == seg.signature && pinnedInputsStayed(seg, pointers) &&
            lentResultsReleased(rec, seg)) {
          replay(ctx, rec, seg, cells, where);
          continue;
        }
        // Other shapes or places, or a lent result still held (the replay
        // would overwrite it; it keeps its memory of the dropped graph's
        // pool): warm up, capture again.
        seg.drop();
        seg.state = State::Warming;
        seg.warmCalls = 0;
      }
      if (eligible && seg.warmCalls >= kGraphWarmCalls &&
          signature == seg.signature) {
        if (capture(ctx, rec, seg, cells, n, pointers)) {
          replay(ctx, rec, seg, cells, where);
          continue;
        }
      }
      runSteps(ctx, rec, cells, plan.begin, plan.end, where);
      if (eligible && seg.state == State::Warming)
        warmed(ctx, rec, seg, cells, std::move(signature),
               std::move(pointers));
    }
  }

  /// Calls run op by op (with the same input shapes) before a capture: the
  /// first call of a body initializes what a capture cannot (cuBLAS
  /// handles and workspaces, lazily loaded kernels).
  static constexpr int kGraphWarmCalls = 1;
  /// Captures of one segment (each after a change of its input shapes)
  /// before it runs op by op for good.
  static constexpr int kGraphMaxCaptures = 4;

  /// A CPU scalar (0-d) input that the segment only reads, such as a
  /// loop's induction tensor: the graph reads it from a 0-d buffer on the
  /// GPU, which each replay fills with its value (a kernel argument, no
  /// host sync). Ops of CUDA tensors take a 0-d tensor of either device
  /// alike (type promotion and results are the same); a segment whose ops
  /// need it on the CPU makes CPU tensors, which its warm-up refuses.
  static bool cpuScalarInput(const at::Tensor &t) {
    return t.is_cpu() && t.dim() == 0 && t.layout() == at::kStrided;
  }

  /// The shapes of `seg`'s inputs in this call, into `out`; false when a
  /// replay cannot stand for this call: an input that is an error (its
  /// dependent errors come from running op by op), neither a dense CUDA
  /// tensor of the stream's device nor a CPU scalar the segment only reads
  /// (cpuScalarInput), or sharing storage with another input (one fixed
  /// buffer each would break the aliasing).
  bool inputSignature(const StreamContext &ctx,
                      const RecordingGraphs::Segment &seg, Cell *const *cells,
                      std::vector<int64_t> &out,
                      std::vector<const void *> &pointers) const {
    const std::vector<uint32_t> &inputs = seg.plan.inputs;
    out.clear();
    pointers.clear();
    c10::SmallVector<const void *, 16> storages;
    for (uint32_t i : inputs) {
      const Cell &c = *cells[i];
      const at::Tensor &t = c.value.tensor;
      if (!c.bound || c.value.error || !t.defined())
        return false;
      if (cpuScalarInput(t)) {
        if (std::find(seg.plan.writtenInputs.begin(),
                      seg.plan.writtenInputs.end(),
                      i) != seg.plan.writtenInputs.end())
          return false;
        out.push_back(-1); // a CPU scalar: no storage of the GPU to share
        out.push_back(static_cast<int64_t>(t.scalar_type()));
        pointers.push_back(nullptr);
        continue;
      }
      if (!t.is_cuda() || t.layout() != at::kStrided ||
          t.get_device() != ctx.device->device() ||
          !t.is_non_overlapping_and_dense())
        return false;
      storages.push_back(t.storage().unsafeGetStorageImpl());
      pointers.push_back(t.data_ptr());
      out.push_back(static_cast<int64_t>(t.scalar_type()));
      out.push_back(t.dim());
      out.insert(out.end(), t.sizes().begin(), t.sizes().end());
      out.insert(out.end(), t.strides().begin(), t.strides().end());
    }
    std::sort(storages.begin(), storages.end());
    return std::adjacent_find(storages.begin(), storages.end()) ==
           storages.end();
  }

  /// `seg` ran op by op on inputs of `signature`: one more warm call when
  /// each output is a CUDA tensor (a capture would replay what the
  /// outputs are); a CPU tensor among them rules the graph out for good.
  void warmed(const StreamContext &ctx, const CompiledRecording &rec,
              RecordingGraphs::Segment &seg, Cell *const *cells,
              std::vector<int64_t> signature,
              std::vector<const void *> pointers) {
    for (uint32_t o : seg.plan.outputs) {
      const Cell &c = *cells[o];
      if (!c.bound || c.value.error || !c.value.tensor.defined()) {
        seg.warmCalls = 0; // failed: the next call warms up again
        return;
      }
      if (!c.value.tensor.is_cuda() ||
          c.value.tensor.get_device() != ctx.device->device())
        return refuse(rec, seg, "it makes a tensor off the stream's GPU");
    }
    seg.warmCalls = signature == seg.signature ? seg.warmCalls + 1 : 1;
    seg.signature = std::move(signature);
    seg.warmPointers = std::move(pointers);
  }

  /// This call finds each pinned input of `seg`'s graph where the graph
  /// reads it (`pointers`: inputSignature's); those it does not are marked
  /// as moving.
  static bool pinnedInputsStayed(RecordingGraphs::Segment &seg,
                                 const std::vector<const void *> &pointers) {
    bool stayed = true;
    for (size_t j = 0; j < seg.pinnedAt.size(); ++j)
      if (seg.pinnedAt[j] && pointers[j] != seg.pinnedAt[j]) {
        seg.moves.resize(seg.pinnedAt.size(), false);
        seg.moves[j] = true;
        stayed = false;
      }
    return stayed;
  }

  /// A line for the debug log (ExecutorCallbacks::onDebug), any thread.
  void debug(const std::string &line) {
    if (callbacks.onDebug)
      callbacks.onDebug(line);
  }

  /// `seg` runs op by op from now on, for `why`.
  void refuse(const CompiledRecording &rec, RecordingGraphs::Segment &seg,
              const std::string &why) {
    seg.drop();
    seg.state = RecordingGraphs::Segment::State::Off;
    graphCounters->refused += 1;
    debug("cuda graphs: recording " + std::to_string(rec.id) + " " +
          seg.traceName + " runs op by op: " + why);
  }

  /// Captures `seg` on this call's inputs (copied into fixed buffers
  /// first, outside the capture); false, and the segment refused, when the
  /// capture fails or what it made cannot be replayed faithfully.
  bool capture(StreamContext &ctx, const CompiledRecording &rec,
               RecordingGraphs::Segment &seg, Cell *const *cells, size_t n,
               const std::vector<const void *> &pointers) {
    const GraphSegment &plan = seg.plan;
    if (seg.captures >= kGraphMaxCaptures) {
      refuse(rec, seg,
             "its input shapes changed " + std::to_string(seg.captures) +
                 " times");
      return false;
    }
    if (graphCounters->poolBytes >= options.cudaGraphPoolBytes) {
      refuse(rec, seg,
             "this worker's graphs hold " +
                 std::to_string(graphCounters->poolBytes.load()) +
                 " bytes of pools (the bound)");
      return false;
    }
    if (graphCounters->graphs >= options.cudaGraphMax) {
      refuse(rec, seg,
             "this worker holds " + std::to_string(options.cudaGraphMax) +
                 " graphs (the bound)");
      return false;
    }
    // An input where it was at the warm call too (a parameter, a buffer
    // the caller keeps) is read and written in place: no copy in or back
    // at a replay. The others, made anew for each call (activations),
    // are copied into the graph's buffers.
    std::vector<at::Tensor> inputs;
    std::vector<const void *> pinnedAt(plan.inputs.size(), nullptr);
    inputs.reserve(plan.inputs.size());
    for (size_t j = 0; j < plan.inputs.size(); ++j) {
      const at::Tensor &t = cells[plan.inputs[j]]->value.tensor;
      if (pointers[j] && j < seg.warmPointers.size() &&
          pointers[j] == seg.warmPointers[j] &&
          !(j < seg.moves.size() && seg.moves[j])) {
        pinnedAt[j] = pointers[j];
        inputs.push_back(t);
        continue;
      }
      if (cpuScalarInput(t)) { // read from the GPU (cpuScalarInput)
        at::Tensor buffer = at::empty(
            {}, t.options().device(c10::Device(
                    c10::kCUDA,
                    static_cast<c10::DeviceIndex>(ctx.device->device()))));
        buffer.fill_(t.item());
        inputs.push_back(std::move(buffer));
        continue;
      }
      at::Tensor buffer = at::empty_strided(t.sizes(), t.strides(), t.options());
      buffer.copy_(t);
      inputs.push_back(std::move(buffer));
    }
    // The capture runs on a frame of its own: the inputs bound to the
    // buffers, whatever the segment defines or frees in scratch cells, so
    // the call's cells stay as they are until the replay.
    std::vector<Cell> scratch(n);
    std::vector<Cell *> frame(cells, cells + n);
    for (size_t j = 0; j < plan.inputs.size(); ++j) {
      frame[plan.inputs[j]] = &scratch[plan.inputs[j]];
      scratch[plan.inputs[j]].setTensor(inputs[j]);
    }
    for (size_t k = plan.begin; k < plan.end; ++k) {
      const CompiledRecording::Step &step = rec.steps[k];
      for (uint32_t f : step.frees)
        frame[f] = &scratch[f];
      for (uint32_t r : step.op.results)
        frame[r] = &scratch[r];
    }
    auto undefined = [](size_t) -> ErrorPtr {
      return std::make_shared<const ErrorRecord>(
          ErrorRecord{0, 0, "an undefined result", ""});
    };
    c10::SmallVector<const void *, 16> inputStorages;
    for (const at::Tensor &t : inputs)
      inputStorages.push_back(t.storage().unsafeGetStorageImpl());
    // Which input each cell views (-1: none), to copy back an input written
    // through a view: the plan only says which operands an op writes.
    std::vector<int64_t> viewOf(n, -1);
    std::vector<bool> back(inputs.size(), false);
    for (uint32_t w : plan.writtenInputs)
      back[std::find(plan.inputs.begin(), plan.inputs.end(), w) -
           plan.inputs.begin()] = true;
    std::string error;
    std::unique_ptr<DeviceGraph> graph = ctx.device->capture(
        [&] {
          for (size_t k = plan.begin; k < plan.end; ++k) {
            const CompiledRecording::Step &step = rec.steps[k];
            if (step.isDelete) {
              for (uint32_t f : step.frees)
                frame[f]->clear();
              continue;
            }
            invoke(step.op, frame.data(), ctx.stack, undefined);
            for (uint32_t o : step.op.outputs) {
              bool result = std::find(step.op.results.begin(),
                                      step.op.results.end(),
                                      o) != step.op.results.end();
              if (!result && viewOf[o] >= 0)
                back[viewOf[o]] = true; // written through a view
              const at::Tensor &t = frame[o]->value.tensor;
              if (result && t.defined() && t.has_storage()) {
                auto in = std::find(inputStorages.begin(), inputStorages.end(),
                                    t.storage().unsafeGetStorageImpl());
                viewOf[o] = in == inputStorages.end()
                                ? -1
                                : static_cast<int64_t>(in - inputStorages.begin());
              }
            }
          }
        },
        error);
    ctx.stack.clear();
    if (!graph) {
      refuse(rec, seg, "its capture failed: " + error);
      return false;
    }
    std::vector<at::Tensor> outputs;
    std::vector<GraphOutput> bindings(plan.outputs.size());
    std::vector<at::Tensor> shared;
    // Outputs by the pool storage they are in: several in one where one is
    // a result are bound to views of one copy of that storage, since a copy
    // of each would lose their sharing.
    std::unordered_map<const void *, std::vector<size_t>> byStorage;
    for (size_t j = 0; j < plan.outputs.size(); ++j) {
      const Cell &c = *frame[plan.outputs[j]];
      const at::Tensor &t = c.value.tensor;
      if (!c.bound || c.value.error || !t.defined() || !t.is_cuda()) {
        refuse(rec, seg, "its capture made no CUDA tensor for a result");
        return false;
      }
      outputs.push_back(t);
      const void *storage = t.storage().unsafeGetStorageImpl();
      auto in = std::find(inputStorages.begin(), inputStorages.end(), storage);
      if (in == inputStorages.end()) {
        byStorage[storage].push_back(j);
        continue;
      }
      // An input (what an in-place op returns) or a view of one stands for
      // the caller's tensor; the buffer is the graph's.
      size_t k = in - inputStorages.begin();
      GraphOutput &b = bindings[j];
      b.source = k;
      outputs[j] = at::Tensor();
      if (t.unsafeGetTensorImpl() == inputs[k].unsafeGetTensorImpl()) {
        b.kind = GraphOutput::Input;
        continue;
      }
      if (cells[plan.inputs[k]]->value.tensor.is_cpu() ||
          t.scalar_type() != inputs[k].scalar_type()) {
        refuse(rec, seg,
               "a result views an input as another dtype or device");
        return false;
      }
      b.kind = GraphOutput::InputView;
      b.sizes = t.sizes().vec();
      b.strides = t.strides().vec();
      b.offset = t.storage_offset() - inputs[k].storage_offset();
    }
    for (const auto &[storage, members] : byStorage) {
      if (members.size() < 2 ||
          std::none_of(members.begin(), members.end(),
                       [&](size_t j) { return seg.outputIsResult[j]; }))
        continue; // copied out alone, or all locals bound to the buffers
      const at::Tensor &first = outputs[members[0]];
      size_t item = first.element_size();
      size_t bytes = first.storage().nbytes();
      for (size_t j : members)
        if (outputs[j].scalar_type() != first.scalar_type() ||
            bytes % item) {
          refuse(rec, seg, "results of several dtypes share storage");
          return false;
        }
      at::Tensor base = at::empty({0}, first.options());
      base.set_(first.storage(), 0, {static_cast<int64_t>(bytes / item)}, {1});
      for (size_t j : members) {
        GraphOutput &b = bindings[j];
        b.kind = GraphOutput::Shared;
        b.source = shared.size();
        b.sizes = outputs[j].sizes().vec();
        b.strides = outputs[j].strides().vec();
        b.offset = outputs[j].storage_offset();
        outputs[j] = at::Tensor();
      }
      shared.push_back(std::move(base));
    }
    seg.graph = std::move(graph);
    seg.inputs = std::move(inputs);
    seg.outputs = std::move(outputs);
    seg.bindings = std::move(bindings);
    seg.shared = std::move(shared);
    seg.pinnedAt = std::move(pinnedAt);
    for (size_t j = 0; j < seg.inputs.size(); ++j)
      if (seg.pinnedAt[j])
        seg.inputs[j] = at::Tensor(); // the caller's: not the graph's to hold
    seg.copyBack.clear();
    for (size_t k = 0; k < back.size(); ++k)
      if (back[k] && !seg.pinnedAt[k]) // a pinned input is written in place
        seg.copyBack.push_back(k);
    seg.state = RecordingGraphs::Segment::State::Captured;
    seg.captures += 1;
    graphCounters->graphs += 1;
    graphCounters->captures += 1;
    graphCounters->poolBytes += seg.graph->poolBytes();
    debug("cuda graphs: recording " + std::to_string(rec.id) + " " +
          seg.traceName + ": " + std::to_string(plan.end - plan.begin) +
          " steps captured, " +
          std::to_string(seg.pinnedAt.size() -
                         std::count(seg.pinnedAt.begin(), seg.pinnedAt.end(),
                                    nullptr)) +
          " of " + std::to_string(seg.pinnedAt.size()) +
          " inputs in place (pool " + std::to_string(seg.graph->poolBytes()) +
          " bytes); this worker holds " +
          std::to_string(graphCounters->graphs.load()) + " graphs, " +
          std::to_string(graphCounters->poolBytes.load()) + " bytes");
    return true;
  }

  /// Whether no one holds what the last replay of `seg` lent (its results
  /// bound to the graph's buffers): each such buffer is referenced by the
  /// segment alone, as tensor and as storage (a view made of a result holds
  /// the storage). A result still held is marked to be copied out from the
  /// next capture on: the next replay would overwrite it in place.
  bool lentResultsReleased(const CompiledRecording &rec,
                           RecordingGraphs::Segment &seg) {
    bool released = true;
    for (size_t j = 0; j < seg.outputs.size(); ++j) {
      const at::Tensor &t = seg.outputs[j];
      if (!t.defined() || !seg.outputIsResult[j] || seg.keepsResult[j])
        continue;
      if (t.use_count() > 1 || t.storage().use_count() > 1) {
        seg.keepsResult[j] = true;
        released = false;
        debug("cuda graphs: recording " + std::to_string(rec.id) + " " +
              seg.traceName + ": result " + std::to_string(j) +
              " is still held at the next call; copied out from the next "
              "capture on");
      }
    }
    return released;
  }

  /// This call of `seg` as a replay of its graph: the inputs copied into
  /// its buffers, the graph launched, the inputs it wrote copied back, the
  /// cells it frees cleared and its outputs bound (the buffers themselves:
  /// locals die with the call, and results are lent, checked released at
  /// the next replay; copies for the results found still held once). One
  /// trace slice for the replay.
  template <typename Where>
  void replay(StreamContext &ctx, const CompiledRecording &rec,
              RecordingGraphs::Segment &seg, Cell *const *cells,
              Where &where) {
    const GraphSegment &plan = seg.plan;
    const CompiledRecording::Step &first = rec.steps[plan.begin];
    int64_t start = ctx.trace ? traceStart(ctx) : 0;
    try {
      for (size_t j = 0; j < plan.inputs.size(); ++j) {
        if (seg.pinnedAt[j])
          continue;
        const at::Tensor &t = cells[plan.inputs[j]]->value.tensor;
        if (t.is_cpu()) // a CPU scalar (cpuScalarInput): its value
          seg.inputs[j].fill_(t.item());
        else
          seg.inputs[j].copy_(t);
      }
      seg.graph->replay();
      for (size_t k : seg.copyBack)
        cells[plan.inputs[k]]->value.tensor.copy_(seg.inputs[k]);
      // Outputs first, then the frees: an output may be an input the
      // segment frees (`y = x.add_(1); del x`).
      c10::SmallVector<at::Tensor, 8> bound;
      c10::SmallVector<at::Tensor, 2> copies; // of seg.shared, this call's
      for (const at::Tensor &base : seg.shared)
        copies.push_back(base.clone());
      for (size_t j = 0; j < plan.outputs.size(); ++j) {
        const GraphOutput &b = seg.bindings[j];
        switch (b.kind) {
        case GraphOutput::Own:
          bound.push_back(seg.keepsResult[j] ? seg.outputs[j].clone()
                                             : seg.outputs[j]);
          break;
        case GraphOutput::Input:
          bound.push_back(cells[plan.inputs[b.source]]->value.tensor);
          break;
        case GraphOutput::InputView:
          bound.push_back(b.viewOf(cells[plan.inputs[b.source]]->value.tensor));
          break;
        case GraphOutput::Shared:
          bound.push_back(b.viewOf(copies[b.source]));
          break;
        }
      }
      for (uint32_t f : plan.frees)
        cells[f]->clear();
      for (size_t j = 0; j < plan.outputs.size(); ++j)
        cells[plan.outputs[j]]->setTensor(std::move(bound[j]));
      graphCounters->replays += 1;
    } catch (const std::exception &e) {
      // A replay that fails (a CUDA error) fails the segment's outputs as
      // its first instruction, and the graph is not trusted again.
      ErrorPtr root = rootError(first.id, where(first),
                                "CUDA graph replay: " + errorMessage(e));
      for (uint32_t o : plan.outputs)
        cells[o]->setError(root);
      refuse(rec, seg, "its replay failed");
    }
    if (ctx.trace)
      traceFinish(ctx, first.id, seg.traceName, rec.id, start);
  }

  /// One call of a compiled recording: the whole body as one task.
  struct RecordingTask final : Task {
    Impl *impl;
    std::shared_ptr<const CompiledRecording> rec;
    c10::SmallVector<Cell *, 16> frame; ///< formals, results, locals
    c10::SmallVector<Cell, 8> locals;   ///< freed with the task
    std::string location;               ///< of the call

    void run(StreamContext &ctx) override {
      impl->runBody(ctx, *rec, frame.data(), frame.size(),
                    [&](const CompiledRecording::Step &step) {
                      // A stretch's call carries its body's `where`.
                      return step.location +
                             (rec->stretch ? location
                                           : recordingWhere(rec->id,
                                                            instruction,
                                                            location));
                    });
    }
  };

  /// Queues a call of a compiled body; false when this call needs the
  /// expansion (a use error of an actual, a mesh without this rank, ...),
  /// which then reports whatever is wrong exactly as for any instruction.
  bool callCompiled(const plan::Instruction &inst,
                    const std::shared_ptr<const CompiledRecording> &cr) {
    const auto &call = inst.call_recording();
    auto member = membership.find(cr->mesh);
    if (member == membership.end() || !member->second)
      return false;
    auto sit = streams.find(cr->stream);
    if (sit == streams.end())
      return false;
    for (int k = 0; k < call.actuals_size(); ++k)
      if (!checkUse(call.actuals(k), cr->stream, cr->formalWritten[k]).empty())
        return false;
    for (int64_t r : call.results())
      for (int64_t a : call.actuals())
        if (r == a)
          return false;
    auto task = std::make_unique<RecordingTask>();
    task->impl = this;
    task->rec = cr;
    task->instruction = inst.id();
    task->location = inst.location();
    task->locals.resize(cr->locals);
    task->frame.reserve(cr->formals + cr->results + cr->locals);
    for (int64_t a : call.actuals())
      task->frame.push_back(refs.find(a)->second.cell);
    for (int64_t r : call.results())
      task->frame.push_back(define(r, cr->stream));
    for (Cell &c : task->locals)
      task->frame.push_back(&c);
    // Untraced as a whole: it reports an event per body instruction.
    push(sit->second, std::move(task));
    return true;
  }

  void callRecording(const plan::Instruction &inst) {
    const auto &call = inst.call_recording();
    std::vector<int64_t> results(call.results().begin(), call.results().end());
    if (call.stretch() != 0)
      return failStatic(inst,
                        "call_recording.stretch is internal to the executor",
                        results);
    auto it = recordings.find(call.recording());
    if (it == recordings.end())
      return failStatic(inst,
                        "unknown recording " + std::to_string(call.recording()),
                        results);
    const plan::Recording &rec = it->second.plan;
    if (rec.formals_size() != call.actuals_size() ||
        rec.results_size() != call.results_size())
      return failStatic(inst,
                        "recording " + std::to_string(rec.id()) +
                            " called with the wrong number of refs",
                        results);
    if (it->second.compiled && callCompiled(inst, it->second.compiled))
      return;
    std::shared_ptr<const CompiledRecording> keep = it->second.compiled;
    auto stretches = it->second.stretches;
    plan::Recording body = rec; // a nested definition may replace `rec`
    expand(body, {call.actuals().begin(), call.actuals().end()}, results,
           recordingWhere(body.id(), inst.id(), inst.location()),
           stretches.get());
  }

  /// A body's call of its outlined stretch (mapped into the caller's refs
  /// by expand): one compiled task, or the stretch's instructions expanded
  /// when this call needs that.
  void callStretch(const plan::Instruction &inst,
                   const std::vector<Stretched> *stretches) {
    const auto &call = inst.call_recording();
    std::vector<int64_t> results(call.results().begin(), call.results().end());
    uint32_t k = call.stretch();
    if (!stretches || k > stretches->size())
      return failStatic(inst, "internal error: no stretch " + std::to_string(k),
                        results);
    const Stretched &s = (*stretches)[k - 1];
    if (callCompiled(inst, s.compiled))
      return;
    // Its instructions keep their own locations, followed by the body's.
    expand(s.plan, {call.actuals().begin(), call.actuals().end()}, results,
           inst.location(), nullptr);
  }

  /// Submits `body` with its formals renamed to `actuals`, its results to
  /// `results` and every other ref and borrow to fresh local ones, freed
  /// once the call has run. `where` follows each body instruction's
  /// location in its failures.
  /// `stretches`: those `body` calls (Recording::stretches), or null.
  void expand(const plan::Recording &body, const std::vector<int64_t> &actuals,
              const std::vector<int64_t> &results, const std::string &where,
              const std::vector<Stretched> *stretches) {
    std::unordered_map<int64_t, int64_t> rename;
    for (int k = 0; k < body.formals_size(); ++k)
      rename[body.formals(k)] = actuals[k];
    for (int k = 0; k < body.results_size(); ++k)
      rename[body.results(k)] = results[k];
    std::vector<int64_t> locals;
    auto map = [&](int64_t r) {
      auto f = rename.find(r);
      if (f != rename.end())
        return f->second;
      int64_t local = nextLocalRef--;
      rename.emplace(r, local);
      locals.push_back(local);
      return local;
    };
    // Borrow ids, like refs, are local to each call: a loop body that
    // borrows a gradient onto a comm stream borrows anew every iteration.
    std::unordered_map<int64_t, int64_t> borrowRename;
    auto mapBorrow = [&](int64_t id) {
      auto [f, inserted] = borrowRename.emplace(id, 0);
      if (inserted)
        f->second = nextLocalBorrow++;
      return f->second;
    };
    int64_t outer = expanding;
    expanding = body.id();
    for (const auto &b : body.body()) {
      plan::Instruction copy = b;
      mapRefs(copy, map);
      if (copy.has_borrow_create())
        copy.mutable_borrow_create()->set_borrow(
            mapBorrow(copy.borrow_create().borrow()));
      else if (copy.has_borrow_first_use())
        copy.mutable_borrow_first_use()->set_borrow(
            mapBorrow(copy.borrow_first_use().borrow()));
      else if (copy.has_borrow_last_use())
        copy.mutable_borrow_last_use()->set_borrow(
            mapBorrow(copy.borrow_last_use().borrow()));
      else if (copy.has_borrow_drop())
        copy.mutable_borrow_drop()->set_borrow(
            mapBorrow(copy.borrow_drop().borrow()));
      copy.set_location(copy.location() + where);
      if (copy.has_call_recording() && copy.call_recording().stretch() != 0)
        callStretch(copy, stretches);
      else
        submit(copy);
    }
    expanding = outer;
    // Borrows the call dropped are over; their stream tasks hold the shared
    // sync state they still need.
    for (const auto &[formal, local] : borrowRename) {
      auto b = borrows.find(local);
      if (b != borrows.end() && b->second.phase == BorrowPhase::Dropped) {
        dropped.erase(b->second.result);
        borrows.erase(b);
      }
    }
    // Refs local to the call are freed once it has run.
    for (int64_t local : locals)
      forget(local);
  }

  // --- loops (docs/plan.md, `loop`)

  void loop(const plan::Instruction &inst) {
    const plan::Loop &l = inst.loop();
    std::vector<int64_t> results(l.results().begin(), l.results().end());
    auto it = recordings.find(l.recording());
    if (it == recordings.end())
      return failStatic(
          inst, "unknown recording " + std::to_string(l.recording()), results);
    // Loaded plans were checked; instructions submitted one at a time not.
    if (std::string e = loopError(l, it->second.plan); !e.empty())
      return failStatic(inst, e, results);
    for (const plan::Induction &ind : l.induction())
      if (!streams.count(ind.stream()) || !meshOf(ind.mesh()))
        return failStatic(inst,
                          "induction on unknown mesh " +
                              std::to_string(ind.mesh()) + " or stream " +
                              std::to_string(ind.stream()),
                          results);
    if (l.trips() == 0)
      return;
    if (it->second.compiled && loopCompiled(inst, it->second.compiled))
      return;
    std::shared_ptr<const CompiledRecording> keep = it->second.compiled;
    auto stretches = it->second.stretches;
    plan::Recording body = it->second.plan; // as in callRecording
    expandLoop(inst, body, stretches.get());
  }

  /// The tasks queued on every stream and not yet run.
  uint64_t queuedTasks() {
    uint64_t n = 0;
    for (auto &[id, s] : streams)
      n += s.pushed - s.queue->completed();
    return n;
  }

  /// A loop expands one iteration at a time; past kLoopQueueHigh tasks
  /// queued ahead of the streams it waits until they are down to
  /// kLoopQueueLow, so the tasks and cells of a long loop are bounded, not
  /// its trips times its body. The streams never wait on the submit thread
  /// for what is already queued (a borrow's events and a collective's peers
  /// are all in the queues or on other ranks), so this wait ends.
  static constexpr uint64_t kLoopQueueHigh = 1 << 16, kLoopQueueLow = 1 << 15;
  void throttleLoop() {
    flush();
    if (queuedTasks() <= kLoopQueueHigh)
      return;
    while (queuedTasks() > kLoopQueueLow)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

  /// Iteration by iteration: the induction tensors as `aten::scalar_tensor`
  /// calls on their meshes, the body expanded as a call, then the previous
  /// iteration's carried values (locals of the loop) freed.
  void expandLoop(const plan::Instruction &inst, const plan::Recording &body,
                  const std::vector<Stretched> *stretches) {
    const plan::Loop &l = inst.loop();
    std::vector<int64_t> carried(l.carried().begin(), l.carried().end());
    for (int64_t k = 0; k < l.trips(); ++k) {
      std::string where = loopWhere(body.id(), inst.id(), k, inst.location());
      std::vector<int64_t> actuals = carried;
      actuals.insert(actuals.end(), l.captured().begin(), l.captured().end());
      std::vector<int64_t> inductions;
      for (const plan::Induction &ind : l.induction()) {
        int64_t ref = nextLocalRef--;
        plan::Instruction make;
        make.set_id(inst.id());
        make.set_mesh(ind.mesh());
        make.set_stream(ind.stream());
        make.set_location(inst.location() + where);
        plan::CallOp *call = make.mutable_call_op();
        call->set_name("aten::scalar_tensor");
        call->add_args()->mutable_scalar()->set_int_value(l.lower() +
                                                          k * l.step());
        plan::NamedValue *dtype = call->add_kwargs();
        dtype->set_name("dtype");
        dtype->mutable_value()->set_dtype(plan::INT64);
        call->add_results(ref);
        submit(make);
        inductions.push_back(ref);
        actuals.push_back(ref);
      }
      std::vector<int64_t> results;
      if (k + 1 == l.trips())
        results.assign(l.results().begin(), l.results().end());
      else
        for (int i = 0; i < l.carried_size(); ++i)
          results.push_back(nextLocalRef--);
      expand(body, actuals, results, where, stretches);
      for (int64_t r : inductions)
        forget(r);
      if (k > 0)
        for (int64_t r : carried)
          forget(r);
      else
        for (int64_t r : l.consumed())
          forget(r);
      carried = std::move(results);
      throttleLoop();
    }
  }

  /// Every iteration of a loop over a compiled body, as one task.
  struct LoopTask final : Task {
    Impl *impl;
    std::shared_ptr<const CompiledRecording> rec;
    int64_t trips = 0, lower = 0, step = 0;
    size_t carried = 0, inductionAt = 0, inductions = 0;
    /// Formals, results, locals (as a call's frame); the carried formals
    /// are the caller's cells in iteration 0, then `own`'s first cells.
    c10::SmallVector<Cell *, 16> frame;
    /// Carried values after iteration 0, induction tensors, locals.
    std::vector<Cell> own;
    /// The caller's cells of consumed carried refs, cleared after
    /// iteration 0.
    c10::SmallVector<Cell *, 4> consumed;
    std::string location; ///< of the loop

    void run(StreamContext &ctx) override {
      Cell **cells = frame.data();
      Cell *const *results = cells + rec->formals;
      size_t localsAt = rec->formals + rec->results;
      for (int64_t k = 0; k < trips; ++k) {
        if (k == 1)
          for (size_t i = 0; i < carried; ++i)
            cells[i] = &own[i];
        for (size_t i = 0; i < inductions; ++i)
          cells[inductionAt + i]->setTensor(
              at::scalar_tensor(lower + k * step, at::kLong));
        impl->runBody(ctx, *rec, cells, frame.size(),
                      [&](const CompiledRecording::Step &s) {
                        return s.location +
                               loopWhere(rec->id, instruction, k, location);
                      });
        if (k == 0)
          for (Cell *c : consumed)
            c->clear();
        // Iteration k's results are iteration k + 1's carried values; the
        // last iteration's stay where the loop's results are.
        if (k + 1 < trips)
          for (size_t i = 0; i < carried; ++i) {
            own[i].set(std::move(results[i]->value));
            results[i]->clear();
          }
        // Each iteration's locals and induction tensors go with it.
        for (size_t j = localsAt; j < frame.size(); ++j)
          cells[j]->clear();
        for (size_t i = 0; i < inductions; ++i)
          cells[inductionAt + i]->clear();
      }
    }
  };

  /// Queues a loop over a compiled body as one task; false when it needs the
  /// expansion (as callCompiled, and induction tensors the body's stream and
  /// this rank do not hold), which then reports whatever is wrong.
  bool loopCompiled(const plan::Instruction &inst,
                    const std::shared_ptr<const CompiledRecording> &cr) {
    const plan::Loop &l = inst.loop();
    auto member = membership.find(cr->mesh);
    if (member == membership.end() || !member->second)
      return false;
    auto sit = streams.find(cr->stream);
    if (sit == streams.end())
      return false;
    std::vector<int64_t> actuals(l.carried().begin(), l.carried().end());
    actuals.insert(actuals.end(), l.captured().begin(), l.captured().end());
    for (size_t k = 0; k < actuals.size(); ++k)
      if (!checkUse(actuals[k], cr->stream, cr->formalWritten[k]).empty())
        return false;
    for (const plan::Induction &ind : l.induction()) {
      auto m = membership.find(ind.mesh());
      if (ind.stream() != cr->stream || m == membership.end() || !m->second)
        return false;
    }
    for (int64_t r : l.results())
      if (std::find(actuals.begin(), actuals.end(), r) != actuals.end())
        return false;
    auto task = std::make_unique<LoopTask>();
    task->impl = this;
    task->rec = cr;
    task->instruction = inst.id();
    task->location = inst.location();
    task->trips = l.trips();
    task->lower = l.lower();
    task->step = l.step();
    task->carried = l.carried_size();
    task->inductionAt = actuals.size();
    task->inductions = l.induction_size();
    task->own.resize(task->carried + task->inductions + cr->locals);
    task->frame.reserve(cr->formals + cr->results + cr->locals);
    for (int64_t a : actuals)
      task->frame.push_back(refs.find(a)->second.cell);
    for (size_t i = 0; i < task->inductions; ++i)
      task->frame.push_back(&task->own[task->carried + i]);
    for (int64_t r : l.results())
      task->frame.push_back(define(r, cr->stream));
    for (size_t i = 0; i < cr->locals; ++i)
      task->frame.push_back(&task->own[task->carried + task->inductions + i]);
    for (int64_t r : l.consumed())
      task->consumed.push_back(refs.find(r)->second.cell);
    // Untraced as a whole: it reports an event per body instruction.
    push(sit->second, std::move(task));
    // Consumed refs are gone from here on; their cells are reused once the
    // loop (which clears them) has run.
    for (int64_t r : l.consumed()) {
      auto ref = refs.find(r);
      sit->second.retired.emplace_back(sit->second.pushed, ref->second.cell);
      refs.erase(ref);
    }
    return true;
  }

  Status declare(const plan::Program &program) {
    std::vector<std::pair<std::string, int64_t>> shape;
    for (const auto &d : program.root())
      shape.emplace_back(d.name(), d.size());
    if (!meshOf(0)) {
      try {
        setRoot(shape);
      } catch (const std::exception &e) {
        return Status(ErrorCode::Invalid, errorMessage(e));
      }
    } else {
      auto view = mesh::MeshView::root(shape);
      if (!view.ok() || !(view.value() == *meshOf(0)))
        return Status(ErrorCode::Invalid,
                      "plan root mesh does not match this worker's "
                      "root " +
                          meshOf(0)->shapeString());
    }
    for (const auto &m : program.meshes())
      if (Status s = addMesh(m); !s.isOk())
        return s;
    for (const auto &s : program.streams())
      if (!streams.count(s.id()))
        if (Status st = addStream(s); !st.isOk())
          return st;
    return Status();
  }

  size_t liveRefs() const {
    size_t n = 0;
    for (const Cell &c : cellStore)
      n += c.bound;
    return n;
  }

  /// For constants, which name no refs.
  const RefLookup noRefs = [](int64_t ref) -> at::Tensor {
    throw std::runtime_error("ref " + std::to_string(ref) +
                             " in a constant argument");
  };

  ExecutorOptions options;
  ExecutorCallbacks callbacks;
  std::shared_ptr<GraphCounters> graphCounters =
      std::make_shared<GraphCounters>();
  /// This worker's GPU (workerDevice), -1 without CUDA: every stream gets a
  /// CUDA stream of it.
  int device;
  TraceSink traceSink; ///< empty unless callbacks.onTrace is set
  CommunicatorCache comms;
  std::mutex callbackMutex;

  // Submit-thread state.
  std::map<int64_t, mesh::MeshView> meshes;
  std::unordered_map<int64_t, bool> membership; ///< mesh id -> holds this rank
  ska::flat_hash_map<int64_t, RefState> refs;
  std::unordered_map<int64_t, Borrow> borrows;
  std::unordered_map<int64_t, std::string> dropped;
  std::unordered_map<int64_t, Recording> recordings;
  std::unordered_map<std::string, std::unique_ptr<OpInfo>> ops;
  std::string opKey;
  int64_t nextLocalRef = -1;
  /// Borrow ids given to each recording call's borrows: non-negative (-1
  /// means "no borrow" in RefState) and far above any id a plan uses.
  int64_t nextLocalBorrow = int64_t{1} << 62;
  /// The recording whose body is being expanded (0: none), for traces.
  int64_t expanding = 0;
  /// Every cell (stable addresses); cells of deleted refs are reused.
  std::deque<Cell> cellStore;
  std::vector<Cell *> freeCells;

  // Last: stream threads are joined first on destruction.
  std::map<int64_t, Stream> streams;
};

Executor::Executor(ExecutorOptions options, ExecutorCallbacks callbacks)
    : impl(std::make_unique<Impl>(std::move(options), std::move(callbacks))) {}

Executor::~Executor() = default;

Status Executor::declare(const plan::Program &program) {
  return impl->declare(program);
}

void Executor::submit(const plan::Instruction &instruction) {
  impl->submit(instruction);
  impl->flush();
}

Status Executor::run(const plan::Program &program) {
  if (Status s = impl->declare(program); !s.isOk())
    return s;
  // Hand tasks over in batches: one lock and at most one wake-up per batch,
  // while the streams start on the first ones early.
  constexpr int kBatch = 64;
  int n = 0;
  for (const auto &inst : program.instructions()) {
    impl->submit(inst);
    if (++n % kBatch == 0)
      impl->flush();
  }
  impl->flush();
  return Status();
}

bool Executor::waitIdle(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // A stream may wait on another (borrows), so loop until all are idle at
  // once.
  for (int round = 0; round < 2; ++round)
    for (auto &[id, s] : impl->streams) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() < 0 || !s.queue->waitIdle(left))
        return false;
    }
  return true;
}

int64_t Executor::rank() const { return impl->options.rank; }

void Executor::rankFailed(int64_t rank, const std::string &reason) {
  impl->options.health->markFailed(rank, reason);
  impl->comms.abortWith(rank);
}

size_t Executor::liveRefs() const { return impl->liveRefs(); }

CudaGraphStats Executor::cudaGraphStats() const {
  const GraphCounters &c = *impl->graphCounters;
  CudaGraphStats s;
  s.graphs = c.graphs.load();
  s.captures = c.captures.load();
  s.replays = c.replays.load();
  s.refused = c.refused.load();
  s.poolBytes = c.poolBytes.load();
  return s;
}

} // namespace monarch::tensor
