//===- Plan.cpp - Loading and checking executable plans -------------------===//

#include "monarch/tensor/Plan.h"

#include "monarch/mesh/MeshView.h"
#include "monarch/tensor/Collectives.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace monarch::tensor {

void visitValueRefs(const plan::Value &v, RefRole role,
                    const std::function<void(int64_t, RefRole)> &fn) {
  switch (v.kind_case()) {
  case plan::Value::kRef:
    fn(v.ref(), role);
    break;
  case plan::Value::kRefList:
    for (int64_t r : v.ref_list().refs())
      fn(r, role);
    break;
  case plan::Value::kList:
    for (const auto &e : v.list().values())
      visitValueRefs(e, role, fn);
    break;
  case plan::Value::kOptional:
    if (v.optional().has_value())
      visitValueRefs(v.optional().value(), role, fn);
    break;
  default:
    break;
  }
}

namespace {

void mapValueRefs(plan::Value &v, const std::function<int64_t(int64_t)> &fn) {
  switch (v.kind_case()) {
  case plan::Value::kRef:
    v.set_ref(fn(v.ref()));
    break;
  case plan::Value::kRefList:
    for (auto &r : *v.mutable_ref_list()->mutable_refs())
      r = fn(r);
    break;
  case plan::Value::kList:
    for (auto &e : *v.mutable_list()->mutable_values())
      mapValueRefs(e, fn);
    break;
  case plan::Value::kOptional:
    if (v.optional().has_value())
      mapValueRefs(*v.mutable_optional()->mutable_value(), fn);
    break;
  default:
    break;
  }
}

/// Tracks meshes, streams, refs and recordings while walking a plan.
class Validator {
public:
  explicit Validator(const plan::Program &program) : program(program) {}

  Status run() {
    if (program.root_size() == 0)
      return Status(ErrorCode::Invalid, "plan has no root mesh");
    std::vector<std::pair<std::string, int64_t>> shape;
    for (const auto &d : program.root())
      shape.emplace_back(d.name(), d.size());
    auto root = mesh::MeshView::root(shape);
    if (!root.ok())
      return Status(ErrorCode::Invalid,
                    "invalid root mesh: " + root.error().message);
    rootSize = root->size();
    meshes.emplace(0, root.value());
    streams.insert(0);
    for (const auto &m : program.meshes())
      if (Status s = addMesh(m); !s.isOk())
        return s;
    for (const auto &s : program.streams())
      if (Status st = addStream(s); !st.isOk())
        return st;
    std::unordered_set<int64_t> defined;
    for (const auto &inst : program.instructions())
      if (Status s = check(inst, defined, /*inRecording=*/false); !s.isOk())
        return s;
    return Status();
  }

private:
  static Status fail(const plan::Instruction &inst, const std::string &msg) {
    std::ostringstream os;
    os << "instruction " << inst.id() << " (" << kindName(inst) << "): " << msg;
    return Status(ErrorCode::Invalid, os.str());
  }

  /// A planned tensor type: sizes non-negative and a byte count that fits in
  /// int64 (workers allocate it when a collective's input is an error).
  static Status checkMeta(const plan::Instruction &inst,
                          const plan::TensorMeta &meta) {
    unsigned __int128 bytes = std::max<size_t>(elementSize(meta.dtype()), 1);
    for (int64_t d : meta.shape()) {
      if (d < 0)
        return fail(inst, "planned shape has a negative size " +
                              std::to_string(d));
      bytes *= static_cast<uint64_t>(d);
      if (bytes > static_cast<uint64_t>(INT64_MAX))
        return fail(inst, "planned tensor of more than 2^63 bytes");
    }
    return Status();
  }

  Status addMesh(const plan::Mesh &m) {
    if (m.id() <= 0 || meshes.count(m.id()))
      return Status(ErrorCode::Invalid, "mesh id " + std::to_string(m.id()) +
                                            " is reserved or declared twice");
    auto view = meshViewOf(m);
    if (!view.ok())
      return view.status();
    // Arithmetically: the view's largest rank (the views of a plan may be
    // as large as the root, and there may be many of them).
    if (view->maxRank() >= rootSize)
      return Status(ErrorCode::Invalid,
                    "mesh " + std::to_string(m.id()) + " holds rank " +
                        std::to_string(view->maxRank()) +
                        " outside the root mesh of " +
                        std::to_string(rootSize) + " ranks");
    meshes.emplace(m.id(), view.value());
    return Status();
  }

  Status addStream(const plan::Stream &s) {
    if (s.id() <= 0 || !streams.insert(s.id()).second)
      return Status(ErrorCode::Invalid, "stream id " + std::to_string(s.id()) +
                                            " is reserved or declared twice");
    return Status();
  }

  Status check(const plan::Instruction &inst,
               std::unordered_set<int64_t> &defined, bool inRecording) {
    if (inst.kind_case() == plan::Instruction::KIND_NOT_SET)
      return fail(inst, "no instruction kind set (unknown or corrupted)");
    if (!inRecording && !ids.insert(inst.id()).second)
      return fail(inst, "duplicate instruction id");
    if (!meshes.count(inst.mesh()))
      return fail(inst, "unknown mesh " + std::to_string(inst.mesh()));
    if (!streams.count(inst.stream()))
      return fail(inst, "unknown stream " + std::to_string(inst.stream()));
    const mesh::MeshView &view = meshes.at(inst.mesh());

    switch (inst.kind_case()) {
    case plan::Instruction::kCreateMesh:
      return addMesh(inst.create_mesh().mesh());
    case plan::Instruction::kCreateStream:
      return addStream(inst.create_stream().stream());
    case plan::Instruction::kDefineRecording: {
      const auto &rec = inst.define_recording().recording();
      if (!recordings.emplace(rec.id(), &rec).second)
        return fail(inst,
                    "recording " + std::to_string(rec.id()) + " defined twice");
      std::unordered_set<int64_t> local(rec.formals().begin(),
                                        rec.formals().end());
      for (const auto &b : rec.body())
        if (Status s = check(b, local, /*inRecording=*/true); !s.isOk())
          return Status(ErrorCode::Invalid, "in recording " +
                                                std::to_string(rec.id()) +
                                                ": " + s.message());
      for (int64_t r : rec.results())
        if (!local.count(r))
          return fail(inst, "recording result ref " + std::to_string(r) +
                                " is not defined by its body");
      return Status();
    }
    case plan::Instruction::kCallRecording: {
      const auto &call = inst.call_recording();
      if (call.stretch() != 0)
        return fail(inst, "call_recording.stretch is internal to the "
                          "executor; a plan never sets it");
      auto it = recordings.find(call.recording());
      if (it == recordings.end())
        return fail(inst,
                    "unknown recording " + std::to_string(call.recording()));
      if (it->second->formals_size() != call.actuals_size() ||
          it->second->results_size() != call.results_size())
        return fail(
            inst, "recording " + std::to_string(call.recording()) + " takes " +
                      std::to_string(it->second->formals_size()) +
                      " actuals and " +
                      std::to_string(it->second->results_size()) + " results");
      break;
    }
    case plan::Instruction::kLoop:
      if (Status s = checkLoop(inst); !s.isOk())
        return s;
      break;
    case plan::Instruction::kReduce: {
      const auto &r = inst.reduce();
      auto group = view.groupSize({r.dims().begin(), r.dims().end()});
      if (!group.ok())
        return fail(inst, group.error().message);
      if (Status meta = checkMeta(inst, r.input_meta()); !meta.isOk())
        return meta;
      if (r.input_meta().dtype() == plan::DTYPE_UNSPECIFIED)
        return fail(inst, "reduce needs input_meta (dtype and shape)");
      break;
    }
    case plan::Instruction::kSendTensor: {
      const auto &s = inst.send_tensor();
      if (!meshes.count(s.source_mesh()) || !meshes.count(s.dest_mesh()))
        return fail(inst, "send between unknown meshes");
      if (s.meta().dtype() == plan::DTYPE_UNSPECIFIED)
        return fail(inst, "send_tensor needs meta (dtype and shape)");
      if (Status meta = checkMeta(inst, s.meta()); !meta.isOk())
        return meta;
      break;
    }
    case plan::Instruction::kRankTensor:
      for (const auto &d : inst.rank_tensor().dims())
        if (!view.find(d))
          return fail(inst,
                      "unknown dim '" + d + "' of mesh " + view.shapeString());
      break;
    case plan::Instruction::kBorrowCreate:
      if (!streams.count(inst.borrow_create().from_stream()))
        return fail(inst, "borrow from unknown stream");
      break;
    case plan::Instruction::kCallOp:
      if (inst.call_op().name().empty())
        return fail(inst, "call_op without an operator name");
      break;
    default:
      break;
    }

    Status status = Status();
    visitRefs(inst, [&](int64_t ref, RefRole role) {
      if (!status.isOk())
        return;
      if (ref < 0) {
        status = fail(inst, "negative ref " + std::to_string(ref));
        return;
      }
      switch (role) {
      case RefRole::Read:
      case RefRole::Write:
        if (!defined.count(ref))
          status = fail(inst, "ref " + std::to_string(ref) +
                                  " used before it is defined");
        break;
      case RefRole::Define:
        defined.insert(ref);
        break;
      case RefRole::Delete:
        if (!defined.erase(ref))
          status = fail(inst, "ref " + std::to_string(ref) +
                                  " deleted but not defined");
        break;
      }
    });
    return status;
  }

  /// A loop's recording must be known and its own rules hold (loopError);
  /// its induction tensors need a known mesh and stream. Its refs are
  /// checked as any instruction's (visitRefs).
  Status checkLoop(const plan::Instruction &inst) {
    const plan::Loop &loop = inst.loop();
    auto it = recordings.find(loop.recording());
    if (it == recordings.end())
      return fail(inst,
                  "unknown recording " + std::to_string(loop.recording()));
    if (std::string e = loopError(loop, *it->second); !e.empty())
      return fail(inst, e);
    for (const plan::Induction &ind : loop.induction()) {
      if (!meshes.count(ind.mesh()))
        return fail(inst,
                    "induction on unknown mesh " + std::to_string(ind.mesh()));
      if (!streams.count(ind.stream()))
        return fail(inst, "induction on unknown stream " +
                              std::to_string(ind.stream()));
    }
    return Status();
  }

  const plan::Program &program;
  int64_t rootSize = 0;
  std::map<int64_t, mesh::MeshView> meshes;
  std::set<int64_t> streams;
  std::unordered_set<int64_t> ids;
  std::unordered_map<int64_t, const plan::Recording *> recordings;
};

} // namespace

std::string loopError(const plan::Loop &loop, const plan::Recording &rec) {
  if (loop.trips() < 0)
    return "trips is " + std::to_string(loop.trips()) +
           ", a loop runs 0 or more times";
  if (loop.trips() > kMaxLoopTrips)
    return "trips is " + std::to_string(loop.trips()) +
           ", more than the most a loop may run (" +
           std::to_string(kMaxLoopTrips) + ")";
  int64_t formals = static_cast<int64_t>(loop.carried_size()) +
                    loop.captured_size() + loop.induction_size();
  if (rec.formals_size() != formals ||
      rec.results_size() != loop.carried_size() ||
      loop.results_size() != loop.carried_size())
    return "recording " + std::to_string(rec.id()) + " takes " +
           std::to_string(rec.formals_size()) + " formals and " +
           std::to_string(rec.results_size()) +
           " results, but the loop passes " +
           std::to_string(loop.carried_size()) + " carried, " +
           std::to_string(loop.captured_size()) + " captured and " +
           std::to_string(loop.induction_size()) +
           " induction values and binds " +
           std::to_string(loop.results_size()) +
           " results (as many as it carries)";
  if (loop.trips() == 0 && loop.carried_size() > 0)
    return "a loop of 0 trips cannot carry values: nothing would bind its "
           "results";
  // lower + (trips - 1) * step must be an int64, as every value before it.
  int64_t last;
  if (loop.induction_size() > 0 && loop.trips() > 0 &&
      (__builtin_mul_overflow(loop.trips() - 1, loop.step(), &last) ||
       __builtin_add_overflow(loop.lower(), last, &last)))
    return "the induction variable overflows int64 (lower " +
           std::to_string(loop.lower()) + ", step " +
           std::to_string(loop.step()) + ", " + std::to_string(loop.trips()) +
           " trips)";
  std::unordered_set<int64_t> consumed;
  for (int64_t r : loop.consumed()) {
    if (std::find(loop.carried().begin(), loop.carried().end(), r) ==
        loop.carried().end())
      return "consumed ref " + std::to_string(r) + " is not a carried value";
    if (std::find(loop.captured().begin(), loop.captured().end(), r) !=
        loop.captured().end())
      return "consumed ref " + std::to_string(r) +
             " is also captured (every iteration reads it)";
    if (!consumed.insert(r).second)
      return "consumed ref " + std::to_string(r) + " is listed twice";
  }
  return "";
}

std::string opName(const plan::CallOp &op) {
  return op.overload().empty() ? op.name() : op.name() + "." + op.overload();
}

const char *kindName(const plan::Instruction &inst) {
  switch (inst.kind_case()) {
  case plan::Instruction::kCreateMesh:
    return "create_mesh";
  case plan::Instruction::kCreateStream:
    return "create_stream";
  case plan::Instruction::kRankTensor:
    return "rank_tensor";
  case plan::Instruction::kCallOp:
    return "call_op";
  case plan::Instruction::kCallFunction:
    return "call_function";
  case plan::Instruction::kReduce:
    return "reduce";
  case plan::Instruction::kSendTensor:
    return "send_tensor";
  case plan::Instruction::kBorrowCreate:
    return "borrow_create";
  case plan::Instruction::kBorrowFirstUse:
    return "borrow_first_use";
  case plan::Instruction::kBorrowLastUse:
    return "borrow_last_use";
  case plan::Instruction::kBorrowDrop:
    return "borrow_drop";
  case plan::Instruction::kDeleteRefs:
    return "delete_refs";
  case plan::Instruction::kFetch:
    return "fetch";
  case plan::Instruction::kRequestStatus:
    return "request_status";
  case plan::Instruction::kDefineRecording:
    return "define_recording";
  case plan::Instruction::kCallRecording:
    return "call_recording";
  case plan::Instruction::kCallActor:
    return "call_actor";
  case plan::Instruction::kLoop:
    return "loop";
  case plan::Instruction::KIND_NOT_SET:
    return "unset";
  }
  return "unknown";
}

void visitRefs(const plan::Instruction &inst,
               const std::function<void(int64_t, RefRole)> &fn) {
  auto defs = [&](const auto &list) {
    for (int64_t r : list)
      fn(r, RefRole::Define);
  };
  switch (inst.kind_case()) {
  case plan::Instruction::kRankTensor:
    fn(inst.rank_tensor().result(), RefRole::Define);
    break;
  case plan::Instruction::kCallOp:
    for (const auto &a : inst.call_op().args())
      visitValueRefs(a, RefRole::Read, fn);
    for (const auto &a : inst.call_op().kwargs())
      visitValueRefs(a.value(), RefRole::Read, fn);
    defs(inst.call_op().results());
    break;
  case plan::Instruction::kCallFunction:
    for (const auto &a : inst.call_function().args())
      visitValueRefs(a, RefRole::Read, fn);
    defs(inst.call_function().results());
    break;
  case plan::Instruction::kCallActor:
    for (const auto &a : inst.call_actor().args())
      visitValueRefs(a, RefRole::Read, fn);
    defs(inst.call_actor().results());
    break;
  case plan::Instruction::kReduce: {
    const auto &r = inst.reduce();
    fn(r.input(), r.in_place() ? RefRole::Write : RefRole::Read);
    if (r.has_out())
      fn(r.out(), RefRole::Write);
    if (!r.in_place())
      fn(r.result(), RefRole::Define);
    break;
  }
  case plan::Instruction::kSendTensor:
    // Read on source ranks, defined on destination ranks.
    fn(inst.send_tensor().input(), RefRole::Read);
    fn(inst.send_tensor().result(), RefRole::Define);
    break;
  case plan::Instruction::kBorrowCreate:
    fn(inst.borrow_create().input(), RefRole::Read);
    fn(inst.borrow_create().result(), RefRole::Define);
    break;
  case plan::Instruction::kDeleteRefs:
    for (int64_t r : inst.delete_refs().refs())
      fn(r, RefRole::Delete);
    break;
  case plan::Instruction::kFetch:
    fn(inst.fetch().ref(), RefRole::Read);
    break;
  case plan::Instruction::kCallRecording:
    for (int64_t r : inst.call_recording().actuals())
      fn(r, RefRole::Read);
    defs(inst.call_recording().results());
    break;
  case plan::Instruction::kLoop:
    for (int64_t r : inst.loop().carried())
      fn(r, RefRole::Read);
    for (int64_t r : inst.loop().captured())
      fn(r, RefRole::Read);
    for (int64_t r : inst.loop().consumed())
      fn(r, RefRole::Delete);
    defs(inst.loop().results());
    break;
  default:
    break;
  }
}

void mapRefs(plan::Instruction &inst,
             const std::function<int64_t(int64_t)> &fn) {
  auto mapList = [&](auto *list) {
    for (auto &r : *list)
      r = fn(r);
  };
  auto mapArgs = [&](auto *args) {
    for (auto &a : *args)
      mapValueRefs(a, fn);
  };
  switch (inst.kind_case()) {
  case plan::Instruction::kRankTensor:
    inst.mutable_rank_tensor()->set_result(fn(inst.rank_tensor().result()));
    break;
  case plan::Instruction::kCallOp: {
    auto *op = inst.mutable_call_op();
    mapArgs(op->mutable_args());
    for (auto &kw : *op->mutable_kwargs())
      mapValueRefs(*kw.mutable_value(), fn);
    mapList(op->mutable_results());
    break;
  }
  case plan::Instruction::kCallFunction:
    mapArgs(inst.mutable_call_function()->mutable_args());
    mapList(inst.mutable_call_function()->mutable_results());
    break;
  case plan::Instruction::kCallActor:
    mapArgs(inst.mutable_call_actor()->mutable_args());
    mapList(inst.mutable_call_actor()->mutable_results());
    break;
  case plan::Instruction::kReduce: {
    auto *r = inst.mutable_reduce();
    r->set_input(fn(r->input()));
    r->set_result(fn(r->result()));
    if (r->has_out())
      r->set_out(fn(r->out()));
    break;
  }
  case plan::Instruction::kSendTensor: {
    auto *s = inst.mutable_send_tensor();
    s->set_input(fn(s->input()));
    s->set_result(fn(s->result()));
    break;
  }
  case plan::Instruction::kBorrowCreate: {
    auto *b = inst.mutable_borrow_create();
    b->set_input(fn(b->input()));
    b->set_result(fn(b->result()));
    break;
  }
  case plan::Instruction::kDeleteRefs:
    mapList(inst.mutable_delete_refs()->mutable_refs());
    break;
  case plan::Instruction::kFetch:
    inst.mutable_fetch()->set_ref(fn(inst.fetch().ref()));
    break;
  case plan::Instruction::kCallRecording:
    mapList(inst.mutable_call_recording()->mutable_actuals());
    mapList(inst.mutable_call_recording()->mutable_results());
    break;
  case plan::Instruction::kLoop:
    mapList(inst.mutable_loop()->mutable_carried());
    mapList(inst.mutable_loop()->mutable_captured());
    mapList(inst.mutable_loop()->mutable_results());
    mapList(inst.mutable_loop()->mutable_consumed());
    break;
  default:
    break;
  }
}

Expected<mesh::MeshView> meshViewOf(const plan::Mesh &m) {
  std::vector<mesh::Dim> dims;
  for (const auto &d : m.dims())
    dims.push_back({d.name(), d.size(), d.stride()});
  auto view = mesh::MeshView::create(m.offset(), dims);
  if (!view.ok())
    return Status(ErrorCode::Invalid, "mesh " + std::to_string(m.id()) + ": " +
                                          view.error().message);
  return std::move(view).value();
}

Status validatePlan(const plan::Program &program) {
  if (program.magic() != kPlanMagic)
    return Status(ErrorCode::Invalid, "not a monarch plan: bad magic number");
  if (program.version() > kPlanVersion)
    return Status(
        ErrorCode::Invalid,
        "plan schema version " + std::to_string(program.version()) +
            " is newer than this runtime supports (version " +
            std::to_string(kPlanVersion) +
            "); rebuild monarch with the compiler that produced the plan");
  if (program.version() == 0)
    return Status(ErrorCode::Invalid, "plan has no schema version");
  return Validator(program).run();
}

Expected<plan::Program> loadPlan(std::string_view bytes) {
  plan::Program program;
  if (!program.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Status(ErrorCode::Invalid,
                  "corrupted plan: the bytes are not a valid monarch "
                  "plan (protobuf parse failed)");
  if (Status s = validatePlan(program); !s.isOk())
    return s;
  return program;
}

Expected<plan::Program> loadPlanFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status(ErrorCode::Invalid, "cannot open plan file " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  auto program = loadPlan(buf.str());
  if (!program.ok())
    return Status(ErrorCode::Invalid, path + ": " + program.status().message());
  return program;
}

} // namespace monarch::tensor
