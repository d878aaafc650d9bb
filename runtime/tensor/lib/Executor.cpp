//===- Executor.cpp - The tensor engine of one worker ---------------------===//
//
// submit() runs on the host's thread and does everything that depends only
// on the plan and this rank's static state: mesh membership, ref ownership
// and borrow checks (DESIGN.md §6.4), operator lookup and argument binding.
// What touches tensors is queued on the instruction's stream. Torch
// exceptions are caught at the instruction boundary and become error records
// (§6.5).
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Executor.h"

#include "Internal.h"
#include "monarch/tensor/Functions.h"
#include "monarch/tensor/Plan.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/scalar_tensor.h>

#include <atomic>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace monarch::tensor {

using namespace detail;

// --- small pieces
// -------------------------------------------------------------

namespace detail {

void RefTable::set(int64_t ref, RefValue value) {
  std::lock_guard<std::mutex> lock(mutex);
  values[ref] = std::move(value);
}

RefValue RefTable::get(int64_t ref) const {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = values.find(ref);
  if (it == values.end())
    throw std::runtime_error("ref " + std::to_string(ref) +
                             " has no value on this rank");
  return it->second;
}

void RefTable::erase(int64_t ref) {
  std::lock_guard<std::mutex> lock(mutex);
  values.erase(ref);
}

size_t RefTable::size() const {
  std::lock_guard<std::mutex> lock(mutex);
  return values.size();
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

SerialQueue::SerialQueue(std::string name)
    : label(std::move(name)), thread([this] { loop(); }) {}

SerialQueue::~SerialQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_one();
  thread.join();
}

void SerialQueue::push(std::function<void()> task) {
  bool wakeUp;
  {
    std::lock_guard<std::mutex> lock(mutex);
    tasks.push_back(std::move(task));
    pending.store(tasks.size(), std::memory_order_release);
    wakeUp = sleeping && !holding;
  }
  if (wakeUp)
    wake.notify_one();
}

void SerialQueue::holdWakeups(bool hold) {
  bool wakeUp;
  {
    std::lock_guard<std::mutex> lock(mutex);
    holding = hold;
    wakeUp = !hold && sleeping && !tasks.empty();
  }
  if (wakeUp)
    wake.notify_one();
}

bool SerialQueue::waitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  return idle.wait_for(lock, timeout,
                       [&] { return tasks.empty() && !running; });
}

void SerialQueue::loop() {
  std::deque<std::function<void()>> batch;
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    if (tasks.empty() && !stopping) {
      // Spin briefly before parking: a host submitting a stream of small
      // instructions would otherwise pay a futex wake-up per instruction.
      lock.unlock();
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
    for (auto &task : batch) {
      try {
        task();
      } catch (...) {
        // Instruction bodies catch their own errors; nothing may escape a
        // stream thread.
      }
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

TensorFunction FunctionRegistry::find(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = functions.find(name);
  return it == functions.end() ? nullptr : it->second;
}

// --- the executor
// ---------------------------------------------------------------

namespace {

/// What a queued instruction keeps of its plan instruction.
struct InstInfo {
  int64_t id;
  int64_t stream;
  std::string location;
};
using InstPtr = std::shared_ptr<const InstInfo>;

/// One argument of a compiled ATen call.
struct Slot {
  std::optional<c10::IValue> constant;
  bool isRef = false; // a plain Tensor argument: `ref`
  int64_t ref = 0;
  std::unique_ptr<plan::Value> value; // any other non-constant argument
  c10::TypePtr type;
  int64_t fixedSize = 0;
};

/// Everything a queued ATen call needs, in one allocation.
struct CompiledCall {
  c10::OperatorHandle op;
  InstInfo info;
  std::vector<Slot> slots;
  std::vector<int64_t> results;
  std::vector<int64_t> outputs; ///< results + mutated refs
};

/// The static (submit-time) state of a ref on this rank.
struct RefState {
  int64_t stream = 0;
  int64_t mutableBorrow = -1; ///< borrow holding it mutably
  int64_t sharedBorrow = -1;  ///< latest read-only borrow of it
  int sharedBorrows = 0;
  int64_t borrowOf = -1; ///< this ref is the result of that borrow
};

enum class BorrowPhase { Created, FirstUse, LastUse, Dropped };

/// Runtime half of a borrow, shared by the two streams' tasks.
struct BorrowSync {
  Event created;  ///< origin stream reached the borrow
  Event lastUse;  ///< receiving stream is done with it
  RefValue value; ///< written before `created` is signalled
};

struct Borrow {
  int64_t id, input, result, from, to;
  bool isMutable;
  int64_t createdBy;
  BorrowPhase phase = BorrowPhase::Created;
  std::shared_ptr<BorrowSync> sync = std::make_shared<BorrowSync>();
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

} // namespace

struct Executor::Impl {
  Impl(ExecutorOptions opts, ExecutorCallbacks cbs)
      : options(std::move(opts)), callbacks(std::move(cbs)) {
    if (!options.rootShape.empty())
      setRoot(options.rootShape);
    if (options.memoryCapBytes)
      setMemoryCap(options.memoryCapBytes);
    lookup = [this](int64_t ref) {
      RefValue v = table.get(ref);
      if (v.error)
        throw DependentError{v.error};
      return v.tensor;
    };
    streams.emplace(0, std::make_unique<SerialQueue>("default"));
  }

  ~Impl() {
    streams.clear(); // join stream threads before the state they use goes
    if (options.memoryCapBytes)
      setMemoryCap(0);
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
    callbacks.onFailure(f);
  }

  ErrorPtr rootError(const InstInfo &info, const std::string &message) {
    auto e = std::make_shared<ErrorRecord>(
        ErrorRecord{info.id, options.rank, message, info.location});
    report(*e);
    return e;
  }

  void bindError(const std::vector<int64_t> &refs, const ErrorPtr &e) {
    for (int64_t r : refs)
      table.set(r, RefValue{at::Tensor(), e});
  }

  /// Runs `body` as one instruction: an errored input makes `outputs`
  /// dependent errors; an exception makes them point at a new root failure.
  void execute(const InstInfo &info, const std::vector<int64_t> &outputs,
               const std::function<void()> &body) {
    try {
      body();
    } catch (const DependentError &d) {
      bindError(outputs, d.root);
    } catch (const c10::Error &e) {
      bindError(outputs, rootError(info, e.what_without_backtrace()));
    } catch (const std::exception &e) {
      bindError(outputs, rootError(info, e.what()));
    } catch (...) {
      bindError(outputs, rootError(info, "unknown exception"));
    }
  }

  // --- static state ----------------------------------------------------------

  void setRoot(const std::vector<std::pair<std::string, int64_t>> &shape) {
    auto view = mesh::MeshView::root(shape);
    if (!view.ok())
      throw std::invalid_argument("invalid root mesh: " + view.error().message);
    meshes.erase(0);
    meshes.emplace(0, view.value());
  }

  Status addMesh(const plan::Mesh &m) {
    auto view = meshViewOf(m);
    if (!view.ok())
      return view.status();
    meshes.erase(m.id());
    meshes.emplace(m.id(), view.value());
    return Status();
  }

  Status addStream(const plan::Stream &s) {
    if (streams.count(s.id()))
      return Status(ErrorCode::Invalid,
                    "stream " + std::to_string(s.id()) + " already exists");
    streams.emplace(
        s.id(),
        std::make_unique<SerialQueue>(
            s.name().empty() ? "stream" + std::to_string(s.id()) : s.name()));
    return Status();
  }

  std::string streamName(int64_t id) const {
    auto it = streams.find(id);
    return it == streams.end() ? std::to_string(id) : it->second->name();
  }

  const mesh::MeshView *meshOf(int64_t id) const {
    auto it = meshes.find(id);
    return it == meshes.end() ? nullptr : &it->second;
  }

  SerialQueue &queue(int64_t stream) {
    auto it = streams.find(stream);
    return *(it == streams.end() ? streams.at(0) : it->second);
  }

  InstPtr info(const plan::Instruction &inst) {
    return std::make_shared<const InstInfo>(
        InstInfo{inst.id(), inst.stream(), inst.location()});
  }

  void define(int64_t ref, int64_t stream) {
    RefState st;
    st.stream = stream;
    refs[ref] = st;
    dropped.erase(ref);
  }

  /// Fails an instruction before it runs; its outputs become errors.
  void failStatic(const plan::Instruction &inst, const std::string &message,
                  const std::vector<int64_t> &outputs) {
    int64_t stream = streams.count(inst.stream()) ? inst.stream() : 0;
    for (int64_t r : outputs)
      if (!refs.count(r))
        define(r, stream);
    InstPtr i = info(inst);
    queue(stream).push([this, i, message, outputs] {
      bindError(outputs, rootError(*i, message));
    });
  }

  /// Empty when `ref` may be used (`write`: mutated) on `stream`.
  std::string checkUse(int64_t ref, int64_t stream, bool write) {
    auto it = refs.find(ref);
    if (it == refs.end()) {
      auto d = dropped.find(ref);
      if (d != dropped.end())
        return d->second;
      return "ref " + std::to_string(ref) + " is not defined on rank " +
             std::to_string(options.rank);
    }
    RefState &st = it->second;
    if (st.stream != stream)
      return "WRONG_STREAM: ref " + std::to_string(ref) +
             " belongs to stream '" + streamName(st.stream) +
             "' but is used on stream '" + streamName(stream) + "'";
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
        firstUse(b);
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
    const auto *m = meshOf(inst.mesh());
    return !m || m->contains(options.rank); // unknown mesh: fail loudly
  }

  std::vector<int64_t> definedRefs(const plan::Instruction &inst) {
    std::vector<int64_t> out;
    visitRefs(inst, [&](int64_t r, RefRole role) {
      if (role == RefRole::Define || role == RefRole::Write)
        out.push_back(r);
    });
    return out;
  }

  void submit(const plan::Instruction &inst) {
    switch (inst.kind_case()) {
    case plan::Instruction::kCreateMesh:
      if (Status s = addMesh(inst.create_mesh().mesh()); !s.isOk())
        failStatic(inst, s.message(), {});
      return;
    case plan::Instruction::kCreateStream:
      if (Status s = addStream(inst.create_stream().stream()); !s.isOk())
        failStatic(inst, s.message(), {});
      return;
    case plan::Instruction::kDefineRecording:
      recordings[inst.define_recording().recording().id()] =
          inst.define_recording().recording();
      return;
    case plan::Instruction::kCallRecording:
      callRecording(inst);
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
    define(rt.result(), inst.stream());
    InstPtr i = info(inst);
    int64_t result = rt.result();
    queue(inst.stream()).push([this, i, value, result] {
      execute(*i, {result}, [&] {
        table.set(result,
                  RefValue{at::scalar_tensor(value, at::kLong), nullptr});
      });
    });
  }

  const c10::OperatorHandle *findOp(const plan::CallOp &call,
                                    std::string &error) {
    // Reused buffer: most "aten::op.overload" names are past the small
    // string size and this runs once per instruction.
    opKey.assign(call.name());
    if (!call.overload().empty())
      opKey.append(".").append(call.overload());
    auto it = ops.find(opKey);
    if (it != ops.end())
      return &it->second;
    auto handle = c10::Dispatcher::singleton().findSchema(
        c10::OperatorName(call.name(), call.overload()));
    if (!handle) {
      error = "unknown operator " + opKey;
      return nullptr;
    }
    return &ops.emplace(opKey, *handle).first->second;
  }

  void callOp(const plan::Instruction &inst) {
    const auto &call = inst.call_op();
    std::vector<int64_t> results(call.results().begin(), call.results().end());
    std::string error;
    const c10::OperatorHandle *op = findOp(call, error);
    if (!op)
      return failStatic(inst, error, results);
    const c10::FunctionSchema &schema = op->schema();
    const auto &args = schema.arguments();
    std::vector<const plan::Value *> bound(args.size(), nullptr);
    if (static_cast<size_t>(call.args_size()) > args.size())
      return failStatic(inst,
                        opName(call) + " takes " + std::to_string(args.size()) +
                            " arguments but " +
                            std::to_string(call.args_size()) + " were given",
                        results);
    for (int i = 0; i < call.args_size(); ++i)
      bound[i] = &call.args(i);
    for (const auto &kw : call.kwargs()) {
      auto idx = schema.argumentIndexWithName(kw.name());
      if (!idx)
        return failStatic(inst,
                          opName(call) + " has no argument '" + kw.name() + "'",
                          results);
      bound[*idx] = &kw.value();
    }

    auto compiled = std::make_shared<CompiledCall>(
        CompiledCall{*op,
                     InstInfo{inst.id(), inst.stream(), inst.location()},
                     {},
                     results,
                     results});
    compiled->slots.reserve(args.size());
    std::vector<int64_t> &outputs = compiled->outputs;
    std::vector<std::pair<int64_t, bool>> uses; // (ref, mutated)
    uses.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::Argument &arg = args[i];
      Slot slot;
      slot.type = arg.type();
      slot.fixedSize = arg.N() ? *arg.N() : 0;
      if (!bound[i]) {
        if (!arg.default_value())
          return failStatic(
              inst, opName(call) + ": missing argument '" + arg.name() + "'",
              results);
        slot.constant = *arg.default_value();
      } else if (isConstant(*bound[i])) {
        try {
          slot.constant =
              toIValue(*bound[i], slot.type, slot.fixedSize, lookup);
        } catch (const std::exception &e) {
          return failStatic(inst,
                            opName(call) + ": argument '" + arg.name() +
                                "': " + e.what(),
                            results);
        }
      } else {
        const auto &alias = arg.alias_info();
        bool mutated = alias && alias->isWrite();
        if (bound[i]->kind_case() == plan::Value::kRef &&
            slot.type->kind() == c10::TypeKind::TensorType) {
          slot.isRef = true; // the common case, resolved directly
          slot.ref = bound[i]->ref();
          uses.emplace_back(slot.ref, mutated);
          if (mutated)
            outputs.push_back(slot.ref);
        } else {
          slot.value = std::make_unique<plan::Value>(*bound[i]);
          visitValueRefs(*bound[i], RefRole::Read, [&](int64_t r, RefRole) {
            uses.emplace_back(r, mutated);
            if (mutated)
              outputs.push_back(r);
          });
        }
      }
      compiled->slots.push_back(std::move(slot));
    }
    for (const auto &[r, mutated] : uses)
      if (std::string e = checkUse(r, inst.stream(), mutated); !e.empty())
        return failStatic(inst, e, results);
    for (int64_t r : results)
      define(r, inst.stream());

    queue(inst.stream()).push([this, compiled] {
      execute(compiled->info, compiled->outputs, [&] { runCall(*compiled); });
    });
  }

  void runCall(const CompiledCall &call) {
    torch::jit::Stack stack;
    stack.reserve(call.slots.size());
    for (const Slot &s : call.slots) {
      if (s.constant)
        stack.push_back(*s.constant);
      else if (s.isRef)
        stack.push_back(lookup(s.ref));
      else
        stack.push_back(toIValue(*s.value, s.type, s.fixedSize, lookup));
    }
    call.op.callBoxed(&stack);
    bindResults(stack, call.results);
  }

  void bindResults(const std::vector<c10::IValue> &values,
                   const std::vector<int64_t> &results) {
    size_t k = 0;
    auto bind = [&](const at::Tensor &t) {
      if (k < results.size())
        table.set(results[k], RefValue{t, nullptr});
      ++k;
    };
    for (const auto &v : values) {
      if (v.isTensor())
        bind(v.toTensor());
      else if (v.isTensorList())
        for (const at::Tensor &t : v.toTensorList())
          bind(t);
      else if (v.isInt())
        bind(at::scalar_tensor(v.toInt(), at::kLong));
      else if (v.isDouble())
        bind(at::scalar_tensor(v.toDouble(), at::kDouble));
      else if (v.isBool())
        bind(at::scalar_tensor(v.toBool(), at::kBool));
      else if (!v.isNone())
        throw std::runtime_error("cannot bind a result of type " + v.tagKind());
    }
    if (k < results.size())
      throw std::runtime_error("produced " + std::to_string(k) +
                               " tensors but the instruction binds " +
                               std::to_string(results.size()) + " results");
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
    visitRefs(inst, [&](int64_t r, RefRole role) {
      if (role == RefRole::Read && error.empty())
        error = checkUse(r, inst.stream(), false);
    });
    if (!error.empty())
      return failStatic(inst, error, results);
    for (int64_t r : results)
      define(r, inst.stream());
    InstPtr i = info(inst);
    std::vector<plan::Value> argv(args.begin(), args.end());
    queue(inst.stream()).push([this, i, argv, results, fn] {
      execute(*i, results, [&] {
        std::vector<c10::IValue> in;
        for (const auto &a : argv)
          in.push_back(toIValue(a, lookup));
        std::vector<at::Tensor> out = fn(in);
        bindResults(std::vector<c10::IValue>(out.begin(), out.end()), results);
      });
    });
  }

  void callFunction(const plan::Instruction &inst) {
    const auto &call = inst.call_function();
    TensorFunction fn = FunctionRegistry::global().find(call.name());
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
    std::string actor = call.actor(), endpoint = call.endpoint();
    callWith(inst, call.args(), call.results(),
             [actors, actor, endpoint](const std::vector<c10::IValue> &args) {
               return actors->call(actor, endpoint, args);
             });
  }

  CollectiveEnv collectiveEnv(const InstPtr &i) {
    CollectiveEnv env;
    env.rank = options.rank;
    env.stream = i->stream;
    env.backend = options.collectives.get();
    env.cache = &comms;
    env.table = &table;
    env.fail = [this, i](const std::string &m) { return rootError(*i, m); };
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
    if (!r.in_place())
      define(r.result(), inst.stream());
    InstPtr i = info(inst);
    plan::Reduce op = r;
    queue(inst.stream()).push([this, i, op, view, useError] {
      CollectiveEnv env = collectiveEnv(i);
      if (!useError.empty())
        env.inputError = rootError(*i, useError);
      execute(*i, {}, [&] { runReduce(env, op, view); });
    });
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
    if (src->contains(options.rank))
      useError = checkUse(s.input(), inst.stream(), false);
    if (amDest)
      define(s.result(), inst.stream());
    InstPtr i = info(inst);
    plan::SendTensor op = s;
    mesh::MeshView source = *src, dest = *dst;
    queue(inst.stream()).push([this, i, op, source, dest, useError] {
      CollectiveEnv env = collectiveEnv(i);
      if (!useError.empty())
        env.inputError = rootError(*i, useError);
      execute(*i, {}, [&] { runSend(env, op, source, dest); });
    });
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

    Borrow b{bc.borrow(),   bc.input(),    bc.result(), bc.from_stream(),
             inst.stream(), bc.mutable_(), inst.id()};
    if (b.isMutable) {
      origin.mutableBorrow = b.id;
    } else {
      ++origin.sharedBorrows;
      origin.sharedBorrow = b.id;
    }
    define(b.result, b.to);
    refs[b.result].borrowOf = b.id;
    auto sync = b.sync;
    int64_t input = b.input;
    InstPtr i = info(inst);
    borrows.emplace(b.id, std::move(b));
    // The origin stream records the "event" once everything before the
    // borrow on it has run.
    queue(bc.from_stream()).push([this, sync, input] {
      try {
        sync->value = table.get(input);
      } catch (const std::exception &e) {
        sync->value.error = std::make_shared<ErrorRecord>(
            ErrorRecord{-1, options.rank, e.what(), ""});
      }
      sync->created.signal();
    });
  }

  /// Created -> FirstUse: the receiving stream waits for the origin's event.
  void firstUse(Borrow &b) {
    b.phase = BorrowPhase::FirstUse;
    auto sync = b.sync;
    int64_t result = b.result;
    InstPtr i = std::make_shared<const InstInfo>(InstInfo{
        b.createdBy, b.to, "first use of borrow " + std::to_string(b.id)});
    queue(b.to).push([this, sync, result, i] {
      if (sync->created.wait(options.timeout))
        table.set(result, sync->value);
      else
        bindError({result}, rootError(*i, "timed out waiting for the origin "
                                          "stream of the borrow"));
    });
  }

  /// FirstUse -> LastUse: the receiving stream is done; signal the origin.
  void lastUse(Borrow &b) {
    if (b.phase == BorrowPhase::Created)
      firstUse(b);
    b.phase = BorrowPhase::LastUse;
    auto sync = b.sync;
    int64_t result = b.result;
    queue(b.to).push([this, sync, result] {
      table.erase(result);
      sync->lastUse.signal();
    });
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
      return firstUse(b);
    }
    if (inst.has_borrow_last_use()) {
      if (b.phase == BorrowPhase::LastUse)
        return failStatic(
            inst, "borrow " + std::to_string(id) + " already had its last use",
            {});
      return lastUse(b);
    }
    // Drop: the origin stream waits for the receiver's last use.
    if (b.phase != BorrowPhase::LastUse)
      lastUse(b);
    b.phase = BorrowPhase::Dropped;
    RefState &origin = refs.at(b.input);
    if (b.isMutable)
      origin.mutableBorrow = -1;
    else
      --origin.sharedBorrows;
    refs.erase(b.result);
    std::ostringstream msg;
    msg << "DROPPED: ref " << b.result << " was borrow " << b.id
        << ", dropped by instruction " << inst.id();
    if (!inst.location().empty())
      msg << " at " << inst.location();
    dropped[b.result] = msg.str();
    auto sync = b.sync;
    InstPtr i = info(inst);
    queue(b.from).push([this, sync, i] {
      if (!sync->lastUse.wait(options.timeout))
        rootError(*i, "timed out waiting for the last use of the borrow");
    });
  }

  // --- the rest
  // -----------------------------------------------------------------

  void deleteRefs(const plan::Instruction &inst) {
    std::vector<int64_t> gone;
    for (int64_t r : inst.delete_refs().refs()) {
      auto it = refs.find(r);
      if (it == refs.end())
        continue; // never defined on this rank (e.g. another mesh's value)
      if (std::string e = checkUse(r, inst.stream(), false); !e.empty())
        return failStatic(inst, e, {});
      refs.erase(it);
      gone.push_back(r);
    }
    queue(inst.stream()).push([this, gone] {
      for (int64_t r : gone)
        table.erase(r);
    });
  }

  void fetch(const plan::Instruction &inst) {
    int64_t ref = inst.fetch().ref();
    InstPtr i = info(inst);
    std::string useError = checkUse(ref, inst.stream(), false);
    queue(inst.stream()).push([this, i, ref, useError] {
      plan::FetchReply reply;
      reply.set_instruction(i->id);
      reply.set_rank(options.rank);
      auto setError = [&](const ErrorRecord &e) {
        auto *f = reply.mutable_error();
        f->set_instruction(e.instruction);
        f->set_rank(e.rank);
        f->set_message(e.message);
        f->set_location(e.location);
      };
      if (!useError.empty()) {
        setError(*rootError(*i, useError));
      } else {
        try {
          RefValue v = table.get(ref);
          if (v.error)
            setError(*v.error);
          else
            toTensorData(v.tensor, reply.mutable_value());
        } catch (const std::exception &e) {
          setError(*rootError(*i, e.what()));
        }
      }
      std::lock_guard<std::mutex> lock(callbackMutex);
      if (callbacks.onFetch)
        callbacks.onFetch(reply);
    });
  }

  void requestStatus(const plan::Instruction &inst) {
    auto remaining = std::make_shared<std::atomic<size_t>>(streams.size());
    int64_t id = inst.id();
    for (auto &[sid, q] : streams)
      q->push([this, remaining, id] {
        if (remaining->fetch_sub(1) == 1) {
          std::lock_guard<std::mutex> lock(callbackMutex);
          if (callbacks.onStatus)
            callbacks.onStatus(id);
        }
      });
  }

  void callRecording(const plan::Instruction &inst) {
    const auto &call = inst.call_recording();
    std::vector<int64_t> results(call.results().begin(), call.results().end());
    auto it = recordings.find(call.recording());
    if (it == recordings.end())
      return failStatic(inst,
                        "unknown recording " + std::to_string(call.recording()),
                        results);
    const plan::Recording &rec = it->second;
    if (rec.formals_size() != call.actuals_size() ||
        rec.results_size() != call.results_size())
      return failStatic(inst,
                        "recording " + std::to_string(rec.id()) +
                            " called with the wrong number of refs",
                        results);
    std::unordered_map<int64_t, int64_t> rename;
    for (int k = 0; k < rec.formals_size(); ++k)
      rename[rec.formals(k)] = call.actuals(k);
    for (int k = 0; k < rec.results_size(); ++k)
      rename[rec.results(k)] = call.results(k);
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
    std::string where =
        " (recording " + std::to_string(rec.id()) + ", called by instruction " +
        std::to_string(inst.id()) +
        (inst.location().empty() ? "" : " at " + inst.location()) + ")";
    for (const auto &body : rec.body()) {
      plan::Instruction copy = body;
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
      submit(copy);
    }
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
    for (int64_t local : locals) {
      auto st = refs.find(local);
      if (st == refs.end())
        continue;
      int64_t stream = st->second.stream;
      refs.erase(st);
      queue(stream).push([this, local] { table.erase(local); });
    }
  }

  Status declare(const plan::Program &program) {
    std::vector<std::pair<std::string, int64_t>> shape;
    for (const auto &d : program.root())
      shape.emplace_back(d.name(), d.size());
    if (!meshOf(0)) {
      try {
        setRoot(shape);
      } catch (const std::exception &e) {
        return Status(ErrorCode::Invalid, e.what());
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

  ExecutorOptions options;
  ExecutorCallbacks callbacks;
  RefLookup lookup;
  RefTable table;
  CommunicatorCache comms;
  std::mutex callbackMutex;

  // Submit-thread state.
  std::map<int64_t, mesh::MeshView> meshes;
  std::unordered_map<int64_t, RefState> refs;
  std::unordered_map<int64_t, Borrow> borrows;
  std::unordered_map<int64_t, std::string> dropped;
  std::unordered_map<int64_t, plan::Recording> recordings;
  std::unordered_map<std::string, c10::OperatorHandle> ops;
  std::string opKey;
  int64_t nextLocalRef = -1;
  /// Borrow ids given to each recording call's borrows: non-negative (-1
  /// means "no borrow" in RefState) and far above any id a plan uses.
  int64_t nextLocalBorrow = int64_t{1} << 62;

  // Last: stream threads are joined first on destruction.
  std::map<int64_t, std::unique_ptr<SerialQueue>> streams;
};

Executor::Executor(ExecutorOptions options, ExecutorCallbacks callbacks)
    : impl(std::make_unique<Impl>(std::move(options), std::move(callbacks))) {}

Executor::~Executor() = default;

Status Executor::declare(const plan::Program &program) {
  return impl->declare(program);
}

void Executor::submit(const plan::Instruction &instruction) {
  impl->submit(instruction);
}

Status Executor::run(const plan::Program &program) {
  if (Status s = impl->declare(program); !s.isOk())
    return s;
  for (auto &[id, q] : impl->streams)
    q->holdWakeups(true);
  for (const auto &inst : program.instructions())
    impl->submit(inst);
  // Streams created by the program's instructions are in `streams` too.
  for (auto &[id, q] : impl->streams)
    q->holdWakeups(false);
  return Status();
}

bool Executor::waitIdle(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // A stream may queue work on another (borrows), so loop until all are idle
  // at once.
  for (int round = 0; round < 2; ++round)
    for (auto &[id, q] : impl->streams) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() < 0 || !q->waitIdle(left))
        return false;
    }
  return true;
}

int64_t Executor::rank() const { return impl->options.rank; }

size_t Executor::liveRefs() const { return impl->table.size(); }

} // namespace monarch::tensor
