//===- InstructionStream.cpp - A session's instructions, built in C++ -----===//
//
// See InstructionStream.h.
//
//===----------------------------------------------------------------------===//

#include "InstructionStream.h"

#include "monarch/tensor/Plan.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>

namespace monarch::frontend {

namespace {

constexpr uint32_t kTraceMagic = 0x4D4F4E54; // "MONT"

/// Walks a Value for placeholder refs (negative), recording each one's path
/// below `prefix` (value-list indices; -1 marks a ref-list element index
/// that follows).
void collectSlots(const plan::Value &v, std::vector<int32_t> &path,
                  std::vector<std::pair<std::vector<int32_t>, int64_t>> &out) {
  switch (v.kind_case()) {
  case plan::Value::kRef:
    if (v.ref() < 0)
      out.emplace_back(path, -v.ref() - 1);
    break;
  case plan::Value::kRefList:
    for (int i = 0; i < v.ref_list().refs_size(); ++i)
      if (v.ref_list().refs(i) < 0) {
        auto p = path;
        p.push_back(-1);
        p.push_back(i);
        out.emplace_back(std::move(p), -v.ref_list().refs(i) - 1);
      }
    break;
  case plan::Value::kList:
    for (int i = 0; i < v.list().values_size(); ++i) {
      path.push_back(i);
      collectSlots(v.list().values(i), path, out);
      path.pop_back();
    }
    break;
  case plan::Value::kOptional:
    if (v.optional().has_value()) {
      path.push_back(-2); // the optional's value
      collectSlots(v.optional().value(), path, out);
      path.pop_back();
    }
    break;
  default:
    break;
  }
}

/// Sets the ref at `path` (from collectSlots) inside `v`, starting at `at`.
void setSlot(plan::Value *v, const std::vector<int32_t> &path, size_t at,
             int64_t ref) {
  while (at < path.size()) {
    int32_t step = path[at];
    if (step == -1) {
      v->mutable_ref_list()->set_refs(path[at + 1], ref);
      return;
    }
    if (step == -2)
      v = v->mutable_optional()->mutable_value();
    else
      v = v->mutable_list()->mutable_values(step);
    ++at;
  }
  v->set_ref(ref);
}

} // namespace

InstructionStream::InstructionStream(BatchSink sinkIn,
                                     InstructionStreamOptions optionsIn)
    : sink(std::move(sinkIn)), options(optionsIn) {
  if (options.maxBatch == 0)
    options.maxBatch = 1;
  if (sink && options.maxDelay.count() > 0)
    flusher = std::thread([this] { flusherLoop(); });
}

InstructionStream::~InstructionStream() { (void)close(); }

Expected<int64_t>
InstructionStream::defineOp(const std::string &callOp,
                            std::vector<plan::TensorMeta> resultTypes) {
  Template t;
  if (!t.call.ParseFromString(callOp))
    return Status(ErrorCode::Invalid,
                  "defineOp: the bytes are not a plan.CallOp");
  std::vector<int32_t> path;
  for (int i = 0; i < t.call.args_size(); ++i) {
    path = {i};
    collectSlots(t.call.args(i), path, t.inputSlots);
  }
  for (int i = 0; i < t.call.kwargs_size(); ++i) {
    // Kwargs count after the args: index args_size() + i.
    path = {t.call.args_size() + i};
    collectSlots(t.call.kwargs(i).value(), path, t.inputSlots);
  }
  for (const auto &slot : t.inputSlots)
    t.inputs = std::max(t.inputs, slot.second + 1);
  for (int j = 0; j < t.call.results_size(); ++j) {
    if (t.call.results(j) != -(j + 1))
      return Status(ErrorCode::Invalid,
                    "defineOp: result " + std::to_string(j) +
                        " must be the placeholder " + std::to_string(-(j + 1)));
  }
  t.results = t.call.results_size();
  if (!resultTypes.empty() &&
      static_cast<int64_t>(resultTypes.size()) != t.results)
    return Status(ErrorCode::Invalid,
                  "defineOp: " + std::to_string(resultTypes.size()) +
                      " result types for " + std::to_string(t.results) +
                      " results");
  t.resultTypes = std::move(resultTypes);
  std::lock_guard<std::mutex> lock(mu);
  templates.push_back(std::move(t));
  return static_cast<int64_t>(templates.size() - 1);
}

int64_t InstructionStream::location(const std::string &text) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = locationIds.find(text);
  if (it != locationIds.end())
    return it->second;
  int64_t id = static_cast<int64_t>(locations.size());
  locations.push_back(text);
  locationIds.emplace(text, id);
  return id;
}

Status InstructionStream::errorLocked() const {
  if (failed)
    return *failed;
  if (closed)
    return Status(ErrorCode::Closed, "the instruction stream was closed");
  return Status::ok();
}

plan::Instruction *InstructionStream::append(std::unique_lock<std::mutex> &,
                                             bool toStream) {
  ++issuedCount;
  if (!bodies.empty() && !toStream) {
    plan::Instruction *inst = bodies.back().recording.add_body();
    inst->set_id(nextId++); // unique with the stream's: replies name body ids
    return inst;
  }
  if (pending.batch->instructions_size() == 0)
    firstPending = std::chrono::steady_clock::now();
  plan::Instruction *inst = pending.batch->add_instructions();
  inst->set_id(nextId++);
  return inst;
}

bool InstructionStream::localRef(int64_t ref) const {
  for (const auto &b : bodies)
    if (ref >= b.firstLocal)
      return true;
  for (const auto &[lo, hi] : localRanges)
    if (ref >= lo && ref < hi)
      return !boundResults.count(ref);
  return false;
}

void InstructionStream::beginBody(int64_t firstLocalRef) {
  std::lock_guard<std::mutex> lock(mu);
  bodies.push_back(Body{firstLocalRef, {}});
}

int64_t InstructionStream::bodyDepth() const {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int64_t>(bodies.size());
}

int64_t InstructionStream::bodySize() const {
  std::lock_guard<std::mutex> lock(mu);
  return bodies.empty() ? 0 : bodies.back().recording.body_size();
}

void InstructionStream::releaseDeferredLocked(
    const std::unordered_set<int64_t> &keep, std::vector<Placed> *orphans) {
  std::vector<Placed> still;
  for (const Placed &d : deferredDeletes) {
    if (keep.count(d.ref)) {
      if (orphans)
        orphans->push_back(d);
    } else if (!bodies.empty() && d.ref < bodies.back().firstLocal) {
      still.push_back(d); // an enclosing body may still read it
    } else {
      pendingDeletes[{d.mesh, d.stream}].push_back(d.ref);
    }
  }
  deferredDeletes = std::move(still);
}

void InstructionStream::abortBody(int64_t endLocalRef) {
  std::lock_guard<std::mutex> lock(mu);
  if (bodies.empty())
    return;
  // Nothing of the body was sent: its refs exist nowhere.
  localRanges.emplace_back(bodies.back().firstLocal, endLocalRef);
  bodies.pop_back();
  releaseDeferredLocked({}, nullptr);
}

namespace {

/// `body` with refs, borrow ids and instruction ids renumbered in order of
/// appearance (results after the body), serialized deterministically: two
/// traces of the same program give the same bytes.
std::string canonicalBody(const plan::Recording &rec) {
  std::unordered_map<int64_t, int64_t> refs, borrows;
  auto ref = [&](int64_t r) {
    return refs.emplace(r, static_cast<int64_t>(refs.size()) + 1).first->second;
  };
  auto borrow = [&](int64_t b) {
    return borrows.emplace(b, static_cast<int64_t>(borrows.size()) + 1)
        .first->second;
  };
  plan::Recording out;
  for (const auto &inst : rec.body()) {
    plan::Instruction copy = inst;
    copy.clear_id();
    monarch::tensor::mapRefs(copy, ref);
    if (copy.has_borrow_create())
      copy.mutable_borrow_create()->set_borrow(
          borrow(copy.borrow_create().borrow()));
    else if (copy.has_borrow_first_use())
      copy.mutable_borrow_first_use()->set_borrow(
          borrow(copy.borrow_first_use().borrow()));
    else if (copy.has_borrow_last_use())
      copy.mutable_borrow_last_use()->set_borrow(
          borrow(copy.borrow_last_use().borrow()));
    else if (copy.has_borrow_drop())
      copy.mutable_borrow_drop()->set_borrow(
          borrow(copy.borrow_drop().borrow()));
    *out.add_body() = std::move(copy);
  }
  for (int64_t r : rec.results())
    out.add_results(ref(r));
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  out.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

} // namespace

Expected<InstructionStream::EndedBody>
InstructionStream::endBody(int64_t id, const std::vector<int64_t> &results,
                           int64_t endLocalRef,
                           const std::optional<std::string> &previous,
                           const std::optional<std::vector<int64_t>> &formals) {
  bool full = false;
  EndedBody ended;
  {
    std::unique_lock<std::mutex> lock(mu);
    if (Status s = errorLocked(); !s.isOk())
      return s;
    if (bodies.empty())
      return Status(ErrorCode::Invalid, "endBody: no body is being recorded");
    Body body = std::move(bodies.back());
    bodies.pop_back();
    localRanges.emplace_back(body.firstLocal, endLocalRef);
    // Formals: what the body reads or writes before (or without) defining.
    std::unordered_set<int64_t> defined, formalSet;
    for (const auto &inst : body.recording.body()) {
      if (inst.has_fetch())
        ended.fetches.push_back(inst.id());
      monarch::tensor::visitRefs(
          inst, [&](int64_t ref, monarch::tensor::RefRole role) {
            if (role == monarch::tensor::RefRole::Define)
              defined.insert(ref);
            else if (!defined.count(ref) && formalSet.insert(ref).second)
              ended.formals.push_back(ref);
          });
    }
    if (formals) {
      std::unordered_set<int64_t> given;
      for (int64_t f : *formals)
        if (!given.insert(f).second || defined.count(f)) {
          releaseDeferredLocked({}, nullptr);
          return Status(ErrorCode::Invalid,
                        "endBody: formal ref " + std::to_string(f) +
                            (defined.count(f) ? " is defined by the body"
                                              : " is given twice"));
        }
      for (int64_t f : ended.formals)
        if (!given.count(f)) {
          releaseDeferredLocked({}, nullptr);
          return Status(ErrorCode::Invalid,
                        "endBody: the body uses ref " + std::to_string(f) +
                            ", which is not among the formals given");
        }
      ended.formals = *formals;
      formalSet = std::move(given);
    }
    for (int64_t r : results) {
      if (!defined.count(r)) {
        releaseDeferredLocked({}, nullptr); // dropped, as by abortBody
        return Status(ErrorCode::Invalid, "endBody: result ref " +
                                              std::to_string(r) +
                                              " is not defined by the body");
      }
      boundResults.insert(r);
    }
    plan::Recording &rec = body.recording;
    rec.set_id(id);
    for (int64_t f : ended.formals)
      rec.add_formals(f);
    for (int64_t r : results)
      rec.add_results(r);
    ended.canonical = canonicalBody(rec);
    // monarch.compile steps and monarch.range bodies are CUDA-graph
    // candidates: a worker with a GPU captures what of them it can
    // (docs/plan.md, "CUDA graphs"; MONARCH_CUDA_GRAPHS=off runs them op by op).
    rec.set_cuda_graph(true);
    releaseDeferredLocked(formalSet, &ended.orphans);
    if (!previous || *previous != ended.canonical) {
      plan::Instruction *define = append(lock, /*toStream=*/bodies.empty());
      *define->mutable_define_recording()->mutable_recording() = std::move(rec);
      ended.defined = true;
      full = noteAppendedLocked();
    }
  }
  if (full)
    if (Status s = flush(); !s.isOk())
      return s;
  return ended;
}

Expected<int64_t> InstructionStream::appendOnRoot(
    const std::function<void(plan::Instruction &)> &fill) {
  bool full = false;
  int64_t id;
  {
    std::unique_lock<std::mutex> lock(mu);
    if (Status s = errorLocked(); !s.isOk())
      return s;
    plan::Instruction *inst = append(lock);
    id = inst->id();
    inst->set_mesh(0);
    inst->set_stream(0);
    fill(*inst);
    full = noteAppendedLocked();
  }
  if (full)
    if (Status s = flush(); !s.isOk())
      return s;
  return id;
}

Expected<int64_t> InstructionStream::loop(const plan::Loop &loop) {
  return appendOnRoot(
      [&](plan::Instruction &inst) { *inst.mutable_loop() = loop; });
}

Expected<int64_t>
InstructionStream::callRecording(int64_t recording,
                                 const std::vector<int64_t> &actuals,
                                 const std::vector<int64_t> &results) {
  return appendOnRoot([&](plan::Instruction &inst) {
    plan::CallRecording *call = inst.mutable_call_recording();
    call->set_recording(recording);
    for (int64_t a : actuals)
      call->add_actuals(a);
    for (int64_t r : results)
      call->add_results(r);
  });
}

Expected<int64_t> InstructionStream::op(int64_t templateId, int64_t mesh,
                                        int64_t stream, int64_t locationId,
                                        const std::vector<int64_t> &inputs,
                                        const std::vector<int64_t> &results,
                                        bool *fullOut) {
  bool full = false;
  int64_t id;
  {
    std::unique_lock<std::mutex> lock(mu);
    if (Status s = errorLocked(); !s.isOk())
      return s;
    if (templateId < 0 || templateId >= static_cast<int64_t>(templates.size()))
      return Status(ErrorCode::Invalid,
                    "op: unknown template " + std::to_string(templateId));
    const Template &t = templates[templateId];
    if (static_cast<int64_t>(inputs.size()) < t.inputs ||
        static_cast<int64_t>(results.size()) != t.results)
      return Status(
          ErrorCode::Invalid,
          "op: " + std::to_string(inputs.size()) + " inputs and " +
              std::to_string(results.size()) + " results for a template of " +
              std::to_string(t.inputs) + " and " + std::to_string(t.results));
    if (locationId < 0 || locationId >= static_cast<int64_t>(locations.size()))
      return Status(ErrorCode::Invalid,
                    "op: unknown location " + std::to_string(locationId));
    plan::Instruction *inst = append(lock);
    id = inst->id();
    inst->set_mesh(mesh);
    inst->set_stream(stream);
    inst->set_location(locations[locationId]);
    plan::CallOp *call = inst->mutable_call_op();
    *call = t.call;
    for (const auto &[path, input] : t.inputSlots) {
      int32_t top = path[0];
      plan::Value *v =
          top < call->args_size()
              ? call->mutable_args(top)
              : call->mutable_kwargs(top - call->args_size())->mutable_value();
      setSlot(v, path, 1, inputs[input]);
    }
    for (int j = 0; j < call->results_size(); ++j)
      call->set_results(j, results[j]);
    if (recording() && !t.resultTypes.empty())
      for (size_t j = 0; j < results.size(); ++j) {
        // An in-place op's result is its input: typed once, when defined.
        if (!typedRefs.insert(results[j]).second)
          continue;
        plan::RefType rt;
        rt.set_ref(results[j]);
        *rt.mutable_meta() = t.resultTypes[j];
        refTypes.push_back(std::move(rt));
      }
    full = noteAppendedLocked();
  }
  if (fullOut) {
    *fullOut = full;
    return id;
  }
  if (full)
    if (Status s = flush(); !s.isOk())
      return s;
  return id;
}

bool InstructionStream::noteAppendedLocked() {
  if (!sink)
    return false;
  if (static_cast<size_t>(pending.batch->instructions_size()) >= options.maxBatch)
    return true;
  if (pending.batch->instructions_size() == 1)
    wake.notify_one(); // the flusher starts the batch's clock
  return false;
}

Expected<int64_t>
InstructionStream::raw(const std::string &instruction,
                       const std::vector<plan::RefType> &types) {
  plan::Instruction parsed;
  if (!parsed.ParseFromString(instruction))
    return Status(ErrorCode::Invalid,
                  "raw: the bytes are not a plan.Instruction");
  bool full = false;
  int64_t id;
  {
    std::unique_lock<std::mutex> lock(mu);
    if (Status s = errorLocked(); !s.isOk())
      return s;
    // A mesh or stream is created once, a recording defined before it is
    // called: those go to the stream even while a body is recorded.
    bool toStream = parsed.has_create_mesh() || parsed.has_create_stream() ||
                    parsed.has_define_recording();
    plan::Instruction *inst = append(lock, toStream);
    id = inst->id();
    parsed.set_id(id);
    *inst = std::move(parsed);
    if (recording())
      for (const auto &rt : types)
        if (typedRefs.insert(rt.ref()).second)
          refTypes.push_back(rt);
    full = noteAppendedLocked();
  }
  if (full)
    if (Status s = flush(); !s.isOk())
      return s;
  return id;
}

void InstructionStream::deleteRef(int64_t ref, int64_t mesh, int64_t stream) {
  std::lock_guard<std::mutex> lock(mu);
  if (recording() || closed)
    return; // a traced program's values die with their last use
  if (localRef(ref))
    return; // a body's own ref: the workers free it when each call ends
  if (!bodies.empty()) {
    deferredDeletes.push_back({ref, mesh, stream}); // the body may read it
    return;
  }
  pendingDeletes[{mesh, stream}].push_back(ref);
}

InstructionStream::Batch InstructionStream::newBatch() {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 64 << 10; // a full batch of small ops: a few blocks
  options.max_block_size = 1 << 20;
  Batch b;
  b.arena = std::make_unique<google::protobuf::Arena>(options);
  b.batch = google::protobuf::Arena::CreateMessage<plan::InstructionBatch>(
      b.arena.get());
  return b;
}

InstructionStream::Batch InstructionStream::takeLocked() {
  for (auto &[key, refs] : pendingDeletes) {
    plan::Instruction *inst = pending.batch->add_instructions();
    inst->set_id(nextId++);
    inst->set_mesh(key.first);
    inst->set_stream(key.second);
    auto *del = inst->mutable_delete_refs();
    for (int64_t r : refs)
      del->add_refs(r);
  }
  pendingDeletes.clear();
  firstPending.reset();
  Batch out = std::move(pending);
  pending = newBatch();
  return out;
}

Status InstructionStream::send(Batch batch) {
  // Only flush() sends, holding sendMu from taking the batch to sending it:
  // batches leave in the order they were taken.
  Status s = sink(*batch.batch);
  if (!s.isOk()) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed)
      failed = s;
  }
  return s;
}

Status InstructionStream::flush() {
  if (!sink)
    return Status::ok();
  std::lock_guard<std::mutex> order(sendMu);
  Batch batch;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (failed)
      return *failed;
    if (pending.batch->instructions_size() == 0 && pendingDeletes.empty())
      return Status::ok();
    batch = takeLocked();
  }
  return send(std::move(batch));
}

void InstructionStream::flusherLoop() {
  std::unique_lock<std::mutex> lock(mu);
  while (!closed) {
    if (!firstPending) {
      wake.wait(lock, [this] { return closed || firstPending.has_value(); });
      continue;
    }
    auto due = *firstPending + options.maxDelay;
    if (std::chrono::steady_clock::now() < due) {
      wake.wait_until(lock, due);
      continue;
    }
    lock.unlock();
    (void)flush(); // errors are kept in `failed` for the next call
    lock.lock();
  }
}

Status InstructionStream::close() {
  Status s = flush();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (closed)
      return s;
    closed = true;
  }
  wake.notify_all();
  if (flusher.joinable())
    flusher.join();
  return s;
}

void InstructionStream::declare(const plan::Program &declared) {
  std::lock_guard<std::mutex> lock(mu);
  program = declared;
  program.clear_instructions();
}

void InstructionStream::meshOrigin(const plan::MeshOrigin &origin) {
  std::lock_guard<std::mutex> lock(mu);
  origins.push_back(origin);
}

void InstructionStream::opSchema(const plan::OpSchema &schema) {
  std::lock_guard<std::mutex> lock(mu);
  schemas.push_back(schema);
}

plan::TracedProgram InstructionStream::traced(const std::string &entry) const {
  std::lock_guard<std::mutex> lock(mu);
  plan::TracedProgram out;
  out.set_magic(kTraceMagic);
  out.set_version(program.version());
  out.set_entry(entry);
  *out.mutable_program() = program;
  for (const auto &inst : pending.batch->instructions())
    *out.mutable_program()->add_instructions() = inst;
  for (const auto &rt : refTypes)
    *out.add_refs() = rt;
  for (const auto &o : origins)
    *out.add_mesh_origins() = o;
  for (const auto &s : schemas)
    *out.add_schemas() = s;
  return out;
}

int64_t InstructionStream::issued() const {
  std::lock_guard<std::mutex> lock(mu);
  return issuedCount;
}

} // namespace monarch::frontend
