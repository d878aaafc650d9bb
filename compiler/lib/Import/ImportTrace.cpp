//===- ImportTrace.cpp - A traced program to the monarch dialect ----------===//
//
// See ImportTrace.h and docs/python.md ("Tracing to MLIR"). The mapping is the
// inverse of the plan lowering (LowerToPlan.cpp) and reproduces what the old
// hand-printing tracer wrote for each frontend operation: mesh derivations and
// the root are created where first used, 0-d constant tensors become
// `aten::scalar_tensor` ops, an in-place op's result rebinds the ref it
// mutates, and `reduce_(...)`/`out=` leave the ref on the tensor they write.
// A recording (monarch.compile's traced step) becomes a private func.func
// taking the root mesh and its formals, and each call of it a func.call: the
// inverse of LowerToPlan::lowerCall.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Import/ImportTrace.h"

#include "monarch/Dialect/Monarch/IR/MeshLayout.h"
#include "monarch/Dialect/Monarch/IR/MonarchAttrs.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"
#include "monarch/Dialect/Monarch/IR/MonarchTypes.h"
#include "monarch/mesh/MeshView.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

using namespace mlir;
using namespace monarch;
using mesh::MeshView;
namespace pb = google::protobuf;

Location monarch::traceLocation(StringRef location, MLIRContext &context) {
  if (location.empty())
    return UnknownLoc::get(&context);
  auto number = [](StringRef s) -> std::optional<unsigned> {
    unsigned n;
    if (s.empty() || !llvm::all_of(s, llvm::isDigit) || s.getAsInteger(10, n))
      return std::nullopt;
    return n;
  };
  // "file:line:col" (the plan lowering) or "file:line" (the frontend).
  auto [head, last] = location.rsplit(':');
  if (std::optional<unsigned> n = number(last); n && !head.empty()) {
    auto [file, middle] = head.rsplit(':');
    if (std::optional<unsigned> line = number(middle); line && !file.empty())
      return FileLineColLoc::get(&context, file, *line, *n);
    return FileLineColLoc::get(&context, head, *n, 0);
  }
  return FileLineColLoc::get(&context, location, 0, 0);
}

namespace {

//===----------------------------------------------------------------------===//
// Plan enums to the dialect's
//===----------------------------------------------------------------------===//

Type elementType(plan::DType dtype, Builder &b) {
  switch (dtype) {
  case plan::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case plan::INT8:
    return b.getI8Type();
  case plan::INT16:
    return b.getI16Type();
  case plan::INT32:
    return b.getI32Type();
  case plan::INT64:
    return b.getI64Type();
  case plan::FLOAT16:
    return b.getF16Type();
  case plan::FLOAT32:
    return b.getF32Type();
  case plan::FLOAT64:
    return b.getF64Type();
  case plan::BOOL:
    return b.getI1Type();
  case plan::BFLOAT16:
    return b.getBF16Type();
  case plan::COMPLEX64:
    return ComplexType::get(b.getF32Type());
  case plan::COMPLEX128:
    return ComplexType::get(b.getF64Type());
  default:
    return {};
  }
}

std::optional<DType> dialectDType(plan::DType dtype) {
  switch (dtype) {
  case plan::UINT8:
    return DType::uint8;
  case plan::INT8:
    return DType::int8;
  case plan::INT16:
    return DType::int16;
  case plan::INT32:
    return DType::int32;
  case plan::INT64:
    return DType::int64;
  case plan::FLOAT16:
    return DType::float16;
  case plan::FLOAT32:
    return DType::float32;
  case plan::FLOAT64:
    return DType::float64;
  case plan::BOOL:
    return DType::Bool;
  case plan::BFLOAT16:
    return DType::bfloat16;
  case plan::COMPLEX64:
    return DType::complex64;
  case plan::COMPLEX128:
    return DType::complex128;
  default:
    return std::nullopt;
  }
}

std::optional<TorchLayout> dialectLayout(plan::Layout layout) {
  switch (layout) {
  case plan::STRIDED:
    return TorchLayout::strided;
  case plan::SPARSE_COO:
    return TorchLayout::sparse_coo;
  default:
    return std::nullopt;
  }
}

std::optional<MemoryFormat> dialectMemoryFormat(plan::MemoryFormat format) {
  switch (format) {
  case plan::CONTIGUOUS_FORMAT:
    return MemoryFormat::contiguous_format;
  case plan::PRESERVE_FORMAT:
    return MemoryFormat::preserve_format;
  case plan::CHANNELS_LAST:
    return MemoryFormat::channels_last;
  case plan::CHANNELS_LAST_3D:
    return MemoryFormat::channels_last_3d;
  default:
    return std::nullopt;
  }
}

std::optional<ReductionKind> dialectReduction(plan::ReduceOp op) {
  switch (op) {
  case plan::SUM:
    return ReductionKind::sum;
  case plan::AVG:
    return ReductionKind::avg;
  case plan::MIN:
    return ReductionKind::min;
  case plan::MAX:
    return ReductionKind::max;
  case plan::PRODUCT:
    return ReductionKind::product;
  case plan::STACK:
    return ReductionKind::stack;
  default:
    return std::nullopt;
  }
}

std::string formatError(const mesh::MeshError &error) {
  return std::string(mesh::errorKindName(error.kind)) + ": " + error.message;
}

/// The name of the instruction's kind as trace.proto spells it ("call_op").
std::string kindName(const plan::Instruction &inst) {
  if (inst.kind_case() == plan::Instruction::KIND_NOT_SET)
    return "no kind";
  const pb::FieldDescriptor *field =
      inst.GetDescriptor()->FindFieldByNumber(inst.kind_case());
  return field ? field->name() : "unknown kind";
}

/// `rename`, `split`, `slice` or `flatten` of `parent`, as the frontend's
/// mesh methods compute it (the shared mesh library).
mesh::Result<MeshView> applyOrigin(const plan::MeshOrigin &origin,
                                   const MeshView &parent) {
  using R = mesh::Result<MeshView>;
  switch (origin.kind_case()) {
  case plan::MeshOrigin::kRename: {
    const plan::Rename &r = origin.rename();
    if (r.from_size() != r.to_size())
      return R::failure(mesh::ErrorKind::Value,
                        "rename needs as many new names as old ones");
    std::vector<std::pair<std::string, std::string>> renames;
    for (int i = 0; i < r.from_size(); ++i)
      renames.emplace_back(r.from(i), r.to(i));
    return parent.rename(renames);
  }
  case plan::MeshOrigin::kSplit: {
    mesh::SplitSpec spec;
    for (const plan::Split::Dim &d : origin.split().dims())
      spec.dims.emplace_back(
          d.name(), std::vector<std::string>(d.into().begin(), d.into().end()));
    for (const plan::Split::Size &s : origin.split().sizes())
      spec.sizes.emplace_back(s.name(), s.size());
    return parent.split(spec);
  }
  case plan::MeshOrigin::kSlice: {
    MeshView view = parent;
    for (const plan::SliceMesh::Coord &c : origin.slice().coords()) {
      R next = R::failure(mesh::ErrorKind::Value,
                          "slice of dim '" + c.dim() +
                              "' has neither an index nor a range");
      if (c.has_index() && c.index() == SliceOp::kNone) {
        next = R::failure(mesh::ErrorKind::Index,
                          "slice index out of range for dim '" + c.dim() + "'");
      } else if (c.has_index()) {
        next = view.slice(c.dim(), c.index());
      } else if (c.has_range()) {
        const plan::SliceMesh::Range &r = c.range();
        int64_t step = r.has_step() ? r.step() : 1;
        if (step <= 0)
          return R::failure(mesh::ErrorKind::Value,
                            "slice step must be positive, got " +
                                std::to_string(step));
        // INT64_MIN is the dialect's "omitted bound": refused as a bound.
        if ((r.has_start() && r.start() == SliceOp::kNone) ||
            (r.has_stop() && r.stop() == SliceOp::kNone))
          return R::failure(mesh::ErrorKind::Index,
                            "slice bound out of range for dim '" + c.dim() +
                                "'");
        mesh::Range range;
        if (r.has_start())
          range.start = r.start();
        if (r.has_stop())
          range.stop = r.stop();
        range.step = step;
        next = view.slice(c.dim(), range);
      }
      if (!next.ok())
        return next;
      view = std::move(next).value();
    }
    return view;
  }
  case plan::MeshOrigin::kFlatten:
    return parent.flatten(origin.flatten().name());
  default:
    return R::failure(mesh::ErrorKind::Value,
                      "the origin has no kind (rename, split, slice, flatten)");
  }
}

/// One entry per dim of a slice: the generic form of monarch.slice /
/// monarch.slice_mesh (a step of 0 marks an index, kNone an omitted bound).
struct SliceSpec {
  SmallVector<Attribute> dims;
  SmallVector<int64_t> starts, stops, steps;
};

/// `view` as a slice of `of` (slice_mesh's coordinates), if it is one: a
/// dim of `of` missing from `view` is an index, a dim kept is a range (left
/// out when it is the whole dim).
std::optional<SliceSpec> sliceOf(const MeshView &of, const MeshView &view,
                                 Builder &b) {
  std::optional<std::vector<int64_t>> origin = of.coordsOf(view.offset());
  if (!origin)
    return std::nullopt;
  SliceSpec spec;
  size_t next = 0; // the next dim of `view` to match (order is kept)
  MeshView cur = of;
  for (auto [i, d] : llvm::enumerate(of.dims())) {
    int64_t start = (*origin)[i];
    if (next < view.ndim() && view.dims()[next].name == d.name) {
      const mesh::Dim &kept = view.dims()[next++];
      int64_t step = 1;
      if (kept.size > 1) {
        if (d.stride <= 0 || kept.stride % d.stride != 0 ||
            kept.stride / d.stride <= 0)
          return std::nullopt;
        step = kept.stride / d.stride;
      }
      if (start == 0 && step == 1 && kept.size == d.size)
        continue; // the whole dim
      // `start:stop:step` as a person writes it: no stop when the range
      // runs to the end of the dim.
      std::optional<int64_t> stop = start + kept.size * step;
      if (*stop >= d.size)
        stop.reset();
      spec.dims.push_back(b.getStringAttr(d.name));
      spec.starts.push_back(start);
      spec.stops.push_back(stop ? *stop : SliceOp::kNone);
      spec.steps.push_back(step);
      auto sliced = cur.slice(d.name, mesh::Range{start, stop, step});
      if (!sliced.ok())
        return std::nullopt;
      cur = std::move(sliced).value();
    } else {
      spec.dims.push_back(b.getStringAttr(d.name));
      spec.starts.push_back(start);
      spec.stops.push_back(SliceOp::kNone);
      spec.steps.push_back(0);
      auto sliced = cur.slice(d.name, start);
      if (!sliced.ok())
        return std::nullopt;
      cur = std::move(sliced).value();
    }
  }
  if (next != view.ndim() || cur != view)
    return std::nullopt;
  return spec;
}

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

struct MeshInfo {
  MeshView view;
  MeshType type;
  const pb::Message *decl = nullptr;
  const plan::MeshOrigin *origin = nullptr;
  /// Reached in issue order (Program.meshes are declared from the start).
  bool declared = false;
  Value value;
};

struct StreamInfo {
  std::string name;
  const pb::Message *decl = nullptr;
  bool declared = false;
  Value value;
};

struct RefInfo {
  /// The SSA value that holds the ref now (an in-place op rebinds it).
  Value value;
  const plan::Instruction *definedBy = nullptr;
  const plan::Instruction *deletedBy = nullptr;
};

/// The arguments of one call: the dialect's `args` (placeholders for
/// tensors) and the tensor operands, plus the refs they name.
struct ArgList {
  SmallVector<Attribute> attrs;
  SmallVector<Value> tensors;
  SmallVector<int64_t> refs;
};

class TraceImporter {
public:
  TraceImporter(const plan::TracedProgram &trace, MLIRContext &context,
                const TraceImportOptions &options)
      : trace(trace), program(trace.program()), context(context),
        options(options), b(&context) {}

  OwningOpRef<ModuleOp> run();

private:
  // --- diagnostics ----------------------------------------------------------
  Location where(const pb::Message &message);
  Location where(const plan::Instruction &inst);
  /// The location of the ops an instruction becomes: the frontend's source
  /// line that issued it (the plan lowering copies it back), not the trace.
  Location opLoc(const plan::Instruction &inst) {
    return traceLocation(inst.location(), context);
  }
  InFlightDiagnostic error(const pb::Message &message);
  /// An error about `inst`, prefixed "instruction ID (KIND): ".
  InFlightDiagnostic error(const plan::Instruction &inst);

  // --- declarations ---------------------------------------------------------
  LogicalResult declareRoot();
  LogicalResult declareMesh(const plan::Mesh &mesh, const pb::Message &where);
  LogicalResult declareStream(const plan::Stream &stream,
                              const pb::Message &where);
  LogicalResult checkOrigins();
  LogicalResult collectRefTypes();
  LogicalResult collectSchemas();

  // --- values ---------------------------------------------------------------
  MeshInfo makeMeshInfo(const MeshView &view);
  FailureOr<MeshInfo *> meshInfo(int64_t id, const plan::Instruction &inst,
                                 StringRef role);
  /// The value of a mesh an instruction runs on (declared by now), made
  /// where first needed.
  FailureOr<Value> meshValue(int64_t id, const plan::Instruction &inst);
  /// The op of `m`'s recorded derivation from `parent`.
  Value buildDerived(const MeshInfo &m, Value parent, Location loc);
  FailureOr<StreamInfo *> streamInfo(int64_t id, const plan::Instruction &inst);
  FailureOr<Value> streamValue(int64_t id, const plan::Instruction &inst);
  FailureOr<Value> use(int64_t ref, const plan::Instruction &inst);
  FailureOr<RankedTensorType> localType(const plan::TensorMeta &meta,
                                        const plan::Instruction &inst,
                                        StringRef what);
  /// The local type of a ref `inst` defines: its RefType, else `fallback`;
  /// both given and different is an error.
  FailureOr<RankedTensorType> newRefType(int64_t ref,
                                         const plan::Instruction &inst,
                                         RankedTensorType fallback = {});
  LogicalResult checkNewRef(int64_t ref, const plan::Instruction &inst);
  void define(int64_t ref, Value value, const plan::Instruction &inst);
  DTensorType tensorType(RankedTensorType local, const MeshInfo &mesh,
                         const StreamInfo &stream);
  const MeshInfo *meshOfValue(Value tensor);

  // --- instructions ---------------------------------------------------------
  LogicalResult importInstruction(const plan::Instruction &inst);
  LogicalResult importArgs(const plan::Instruction &inst,
                           ArrayRef<const plan::Value *> values,
                           ArrayRef<std::string> names, ArgList &args);
  LogicalResult importValue(const plan::Value &v, const plan::Instruction &inst,
                            const Twine &what, ArgList &args);
  FailureOr<Value> importConstant(const plan::TensorData &data,
                                  const plan::Instruction &inst,
                                  const Twine &what);
  LogicalResult importCall(const plan::Instruction &inst, bool isAten);
  LogicalResult importRank(const plan::Instruction &inst);
  LogicalResult importReduce(const plan::Instruction &inst);
  LogicalResult importSend(const plan::Instruction &inst);
  LogicalResult importBorrow(const plan::Instruction &inst);
  LogicalResult importBorrowEvent(const plan::Instruction &inst);
  LogicalResult importFetch(const plan::Instruction &inst);
  LogicalResult importDefineRecording(const plan::Instruction &inst);
  LogicalResult importCallRecording(const plan::Instruction &inst);
  LogicalResult importLoop(const plan::Instruction &inst);
  /// Runs the verifier of one new op: a failure is an error about the
  /// instruction that made it (the trace is wrong, not the importer).
  LogicalResult verifyNew(Operation *op, const plan::Instruction &inst);

  const plan::TracedProgram &trace;
  const plan::Program &program;
  MLIRContext &context;
  const TraceImportOptions &options;
  OpBuilder b;

  std::map<int64_t, MeshInfo> meshes;
  std::map<int64_t, StreamInfo> streams;
  // Ids are the trace's, any int64: not DenseMap keys (which reserve two).
  std::unordered_map<int64_t, RefInfo> refs;
  std::unordered_map<int64_t, const plan::RefType *> refTypes;
  llvm::StringMap<const plan::OpSchema *> schemas;
  std::unordered_map<int64_t, Value> borrows;

  /// A recording imported as a function: `@recording_ID(root, formals...)`.
  struct RecordingInfo {
    func::FuncOp func;
    /// The function's argument types: the root mesh, then the formals'.
    SmallVector<Type> argTypes;
    /// The meshes the formals lived on at the definition and the results'
    /// (null where not known): a call's actuals must live there too, since
    /// the body's instructions name their meshes.
    SmallVector<const MeshInfo *> formalMeshes, resultMeshes;
  };
  std::map<int64_t, RecordingInfo> recordings;
  /// Ref `ref` as actual #k of a call of recording `id` (a call_recording or
  /// a loop): of the formal's type, on its mesh.
  FailureOr<Value> useActual(const plan::Instruction &inst,
                             const RecordingInfo &rec, int64_t id, size_t k,
                             int64_t ref);
  /// Checks the refs a call of `rec` binds: distinct, new, of the function's
  /// result types.
  LogicalResult declareResults(const plan::Instruction &inst,
                               RecordingInfo &rec, ArrayRef<int64_t> results);
  /// Binds them to `values`, on the meshes of the function's results.
  void defineResults(const plan::Instruction &inst, const RecordingInfo &rec,
                     ArrayRef<int64_t> results, ValueRange values);
  /// The entry function (recordings' functions go before it).
  func::FuncOp entryFunc;
  /// While a body is imported: its recording, its formals, and the caller's
  /// refs (`refs` then holds the body's own: its formals and what it defines).
  const plan::Recording *recording = nullptr;
  llvm::SmallDenseSet<int64_t, 8> bodyFormals;
  std::unordered_map<int64_t, RefInfo> *callerRefs = nullptr;
  /// Refs a body defines, by the recording that defines them: local to each
  /// call, so never visible outside it, and ids are unique program-wide.
  std::unordered_map<int64_t, int64_t> bodyRefs;
  /// The mesh of values the dialect cannot trace to a mesh-naming op:
  /// formals (block arguments) and call results.
  DenseMap<Value, const MeshInfo *> valueMeshes;
};

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

Location TraceImporter::where(const pb::Message &message) {
  if (options.locate)
    if (std::optional<Location> loc = options.locate(message))
      return *loc;
  if (&message != &trace && options.locate)
    if (std::optional<Location> loc = options.locate(trace))
      return *loc;
  return UnknownLoc::get(&context);
}

Location TraceImporter::where(const plan::Instruction &inst) {
  if (options.locate)
    if (std::optional<Location> loc = options.locate(inst))
      return *loc;
  Location loc = traceLocation(inst.location(), context);
  if (!isa<UnknownLoc>(loc))
    return loc;
  return where(static_cast<const pb::Message &>(trace));
}

InFlightDiagnostic TraceImporter::error(const pb::Message &message) {
  return emitError(where(message));
}

InFlightDiagnostic TraceImporter::error(const plan::Instruction &inst) {
  return emitError(where(inst))
         << "instruction " << inst.id() << " (" << kindName(inst) << "): ";
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

LogicalResult TraceImporter::declareRoot() {
  if (program.root_size() == 0)
    return error(program) << "the traced program has no root mesh "
                             "(Program.root)";
  std::vector<std::pair<std::string, int64_t>> shape;
  for (const plan::MeshDim &d : program.root())
    shape.emplace_back(d.name(), d.size());
  mesh::Result<MeshView> root = MeshView::root(shape);
  if (!root.ok())
    return error(program) << "invalid root mesh: " << formatError(root.error());
  if (root->size() > MeshType::kMaxProcs)
    return error(program) << "the root mesh has " << root->size()
                          << " procs, more than " << MeshType::kMaxProcs;
  MeshInfo info = makeMeshInfo(root.value());
  info.decl = &program;
  info.declared = true;
  meshes.emplace(0, std::move(info));
  return success();
}

MeshInfo TraceImporter::makeMeshInfo(const MeshView &view) {
  SmallVector<StringAttr> names;
  for (const std::string &n : view.names())
    names.push_back(b.getStringAttr(n));
  return MeshInfo{view, MeshType::get(&context, names, view.sizes())};
}

LogicalResult TraceImporter::declareMesh(const plan::Mesh &m,
                                         const pb::Message &where) {
  if (m.id() <= 0)
    return error(where) << "mesh id " << m.id()
                        << " is not a view id (ids > 0; 0 is the root)";
  if (meshes.count(m.id()))
    return error(where) << "mesh " << m.id() << " is declared twice";
  std::vector<mesh::Dim> dims;
  for (const plan::MeshDim &d : m.dims())
    dims.push_back({d.name(), d.size(), d.stride()});
  mesh::Result<MeshView> view = MeshView::create(m.offset(), dims);
  if (!view.ok())
    return error(where) << "invalid mesh " << m.id() << ": "
                        << formatError(view.error());
  // Every rank must lie in the root (as monarch.view checks).
  int64_t last = view->offset(), rootSize = meshes.at(0).view.size();
  bool overflow = false;
  for (const mesh::Dim &d : view->dims()) {
    int64_t span;
    overflow |= llvm::MulOverflow(d.size - 1, d.stride, span);
    overflow |= llvm::AddOverflow(last, span, last);
  }
  if (overflow || last >= rootSize)
    return error(where) << "mesh " << m.id() << " [" << view->layoutString()
                        << "] reaches past the " << rootSize
                        << " procs of the root mesh";
  MeshInfo info = makeMeshInfo(view.value());
  info.decl = &where;
  meshes.emplace(m.id(), std::move(info));
  return success();
}

LogicalResult TraceImporter::declareStream(const plan::Stream &s,
                                           const pb::Message &where) {
  if (s.id() <= 0)
    return error(where) << "stream id " << s.id()
                        << " is not a stream id (ids > 0; 0 is the default)";
  if (streams.count(s.id()))
    return error(where) << "stream " << s.id() << " is declared twice";
  if (s.name().empty())
    return error(where) << "stream " << s.id()
                        << " has no name (\"\" is the default stream)";
  // Tensor types name streams: two ids with one name would be one stream.
  for (auto &[id, other] : streams)
    if (other.name == s.name())
      return error(where) << "streams " << id << " and " << s.id()
                          << " are both named \"" << s.name() << "\"";
  StreamInfo info;
  info.name = s.name();
  info.decl = &where;
  streams.emplace(s.id(), std::move(info));
  return success();
}

LogicalResult TraceImporter::checkOrigins() {
  std::map<int64_t, const plan::MeshOrigin *> byMesh;
  for (const plan::MeshOrigin &o : trace.mesh_origins()) {
    if (o.mesh() <= 0)
      return error(o) << "mesh origin for mesh " << o.mesh()
                      << ": only views (ids > 0) are derived; the root is "
                         "spawned";
    if (!byMesh.emplace(o.mesh(), &o).second)
      return error(o) << "mesh " << o.mesh() << " has two origins";
  }
  // An origin is checked once its parent's view is known: each chain of
  // origins is walked up to a mesh without one, then checked downwards. A
  // declared mesh must be what its origin gives; a mesh that only an origin
  // names (a view no instruction runs on, e.g. the renamed mesh a stage was
  // sliced from, which eager never sends) is declared with that view.
  enum class State { Waiting, Checked };
  std::map<int64_t, State> state;
  auto check = [&](const plan::MeshOrigin &o) -> LogicalResult {
    auto parent = meshes.find(o.parent());
    if (parent == meshes.end())
      return error(o) << "mesh " << o.mesh() << " is derived from mesh "
                      << o.parent()
                      << ", which is neither declared nor derived";
    mesh::Result<MeshView> derived = applyOrigin(o, parent->second.view);
    if (!derived.ok())
      return error(o) << "mesh " << o.mesh() << " is derived from mesh "
                      << o.parent() << " by an invalid "
                      << (o.kind_case() ? o.GetDescriptor()
                                              ->FindFieldByNumber(o.kind_case())
                                              ->name()
                                        : std::string("origin"))
                      << ": " << formatError(derived.error());
    auto it = meshes.find(o.mesh());
    if (it == meshes.end()) {
      MeshInfo info = makeMeshInfo(derived.value());
      info.decl = &o;
      info.declared = true;
      it = meshes.emplace(o.mesh(), std::move(info)).first;
    } else if (derived.value() != it->second.view) {
      return error(o) << "mesh " << o.mesh() << " is recorded as ["
                      << it->second.view.layoutString()
                      << "] but its origin gives [" << derived->layoutString()
                      << "]";
    }
    it->second.origin = &o;
    state[o.mesh()] = State::Checked;
    return success();
  };
  for (const plan::MeshOrigin &o : trace.mesh_origins()) {
    if (state.count(o.mesh()))
      continue;
    SmallVector<const plan::MeshOrigin *> chain{&o};
    state[o.mesh()] = State::Waiting;
    for (;;) {
      auto up = byMesh.find(chain.back()->parent());
      if (up == byMesh.end())
        break;
      auto seen = state.find(up->first);
      if (seen != state.end() && seen->second == State::Checked)
        break;
      if (seen != state.end())
        return error(*up->second)
               << "the origins of mesh " << up->first << " form a cycle";
      state[up->first] = State::Waiting;
      chain.push_back(up->second);
    }
    for (const plan::MeshOrigin *c : llvm::reverse(chain))
      if (failed(check(*c)))
        return failure();
  }
  return success();
}

LogicalResult TraceImporter::collectRefTypes() {
  for (const plan::RefType &t : trace.refs()) {
    if (!refTypes.emplace(t.ref(), &t).second)
      return error(t) << "ref " << t.ref() << " has two types";
    if (!elementType(t.meta().dtype(), b))
      return error(t) << "ref " << t.ref() << " has no dtype ("
                      << plan::DType_Name(t.meta().dtype()) << ")";
    for (int64_t d : t.meta().shape())
      if (d < 0)
        return error(t) << "ref " << t.ref() << " has a negative size " << d;
  }
  return success();
}

LogicalResult TraceImporter::collectSchemas() {
  for (const plan::OpSchema &s : trace.schemas()) {
    std::string key =
        s.name() + (s.overload().empty() ? "" : ".") + s.overload();
    if (!schemas.try_emplace(key, &s).second)
      return error(s) << "two schemas for '" << key << "'";
    llvm::StringSet<> names;
    for (const plan::OpSchema::Argument &a : s.arguments())
      if (!names.insert(a.name()).second)
        return error(s) << "the schema of '" << key << "' names argument '"
                        << a.name() << "' twice";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

FailureOr<MeshInfo *> TraceImporter::meshInfo(int64_t id,
                                              const plan::Instruction &inst,
                                              StringRef role) {
  auto it = meshes.find(id);
  if (it == meshes.end())
    return error(inst) << role << " " << id << " is not declared";
  if (!it->second.declared)
    return error(inst) << role << " " << id
                       << " is used before its create_mesh";
  return &it->second;
}

Value TraceImporter::buildDerived(const MeshInfo &m, Value parent,
                                  Location loc) {
  const plan::MeshOrigin *o = m.origin;
  switch (o->kind_case()) {
  case plan::MeshOrigin::kRename: {
    SmallVector<Attribute> from, to;
    for (const std::string &n : o->rename().from())
      from.push_back(b.getStringAttr(n));
    for (const std::string &n : o->rename().to())
      to.push_back(b.getStringAttr(n));
    return RenameOp::create(b, loc, m.type, parent, b.getArrayAttr(from),
                            b.getArrayAttr(to));
  }
  case plan::MeshOrigin::kSplit: {
    SmallVector<Attribute> from, to, sizeNames;
    SmallVector<int64_t> sizeValues;
    for (const plan::Split::Dim &d : o->split().dims()) {
      from.push_back(b.getStringAttr(d.name()));
      SmallVector<Attribute> into;
      for (const std::string &n : d.into())
        into.push_back(b.getStringAttr(n));
      to.push_back(b.getArrayAttr(into));
    }
    for (const plan::Split::Size &s : o->split().sizes()) {
      sizeNames.push_back(b.getStringAttr(s.name()));
      sizeValues.push_back(s.size());
    }
    return SplitOp::create(b, loc, m.type, parent, b.getArrayAttr(from),
                           b.getArrayAttr(to), b.getArrayAttr(sizeNames),
                           sizeValues);
  }
  case plan::MeshOrigin::kSlice: {
    SliceSpec spec;
    for (const plan::SliceMesh::Coord &c : o->slice().coords()) {
      spec.dims.push_back(b.getStringAttr(c.dim()));
      if (c.has_index()) {
        spec.starts.push_back(c.index());
        spec.stops.push_back(SliceOp::kNone);
        spec.steps.push_back(0);
        continue;
      }
      const plan::SliceMesh::Range &r = c.range();
      spec.starts.push_back(r.has_start() ? r.start() : SliceOp::kNone);
      spec.stops.push_back(r.has_stop() ? r.stop() : SliceOp::kNone);
      spec.steps.push_back(r.has_step() ? r.step() : 1);
    }
    return SliceOp::create(b, loc, m.type, parent, b.getArrayAttr(spec.dims),
                           spec.starts, spec.stops, spec.steps);
  }
  case plan::MeshOrigin::kFlatten:
    return FlattenOp::create(b, loc, m.type, parent, o->flatten().name());
  default:
    return {}; // refused up front (applyOrigin)
  }
}

FailureOr<Value> TraceImporter::meshValue(int64_t id,
                                          const plan::Instruction &inst) {
  FailureOr<MeshInfo *> found = meshInfo(id, inst, "mesh");
  if (failed(found))
    return failure();
  if ((*found)->value)
    return (*found)->value;
  // Made where first used, like the old tracer (and like eager create_mesh),
  // after whatever it derives from: the chain up to a mesh that exists, made
  // outermost first (iteratively: a trace may chain many views). A parent
  // need not have been declared (eager declares only the views it runs on).
  SmallVector<int64_t> chain;
  for (int64_t cur = id;;) {
    MeshInfo &c = meshes.at(cur);
    if (c.value)
      break;
    if (chain.size() > meshes.size())
      return error(inst) << "the origins of mesh " << id << " form a cycle";
    chain.push_back(cur);
    if (cur == 0)
      break;
    cur = c.origin ? c.origin->parent() : 0;
  }
  Location loc = opLoc(inst);
  for (int64_t cur : llvm::reverse(chain)) {
    MeshInfo &m = meshes.at(cur);
    Value result;
    if (cur == 0)
      result = SpawnProcsOp::create(b, loc, m.type).getResult();
    else if (m.origin)
      result = buildDerived(m, meshes.at(m.origin->parent()).value, loc);
    else // no recorded derivation: the canonical form, a view of the root
      result = ViewOp::create(b, loc, meshes.at(0).value, m.view).getResult();
    if (!result)
      return error(inst) << "mesh " << cur << " has an origin of no kind";
    if (failed(verifyNew(result.getDefiningOp(), inst)))
      return failure();
    m.value = result;
  }
  return (*found)->value;
}

FailureOr<StreamInfo *>
TraceImporter::streamInfo(int64_t id, const plan::Instruction &inst) {
  auto it = streams.find(id);
  if (it == streams.end())
    return error(inst) << "stream " << id << " is not declared";
  if (!it->second.declared)
    return error(inst) << "stream " << id
                       << " is used before its create_stream";
  return &it->second;
}

FailureOr<Value> TraceImporter::streamValue(int64_t id,
                                            const plan::Instruction &inst) {
  FailureOr<StreamInfo *> s = streamInfo(id, inst);
  if (failed(s))
    return failure();
  if (!(*s)->value)
    (*s)->value = StreamCreateOp::create(
                      b, opLoc(inst),
                      StreamType::get(&context, b.getStringAttr((*s)->name)))
                      .getResult();
  return (*s)->value;
}

FailureOr<Value> TraceImporter::use(int64_t ref,
                                    const plan::Instruction &inst) {
  auto it = refs.find(ref);
  if (it == refs.end()) {
    if (recording && callerRefs->count(ref))
      return error(inst) << "uses ref " << ref
                         << " of the caller, which is not a formal of "
                            "recording "
                         << recording->id()
                         << " (a body sees only its formals and what it "
                            "defines)";
    if (auto local = bodyRefs.find(ref); local != bodyRefs.end())
      return error(inst) << "uses ref " << ref
                         << ", which is local to recording " << local->second
                         << " (only a call's results leave its body)";
    return error(inst) << "uses ref " << ref
                       << ", which no earlier instruction defines";
  }
  if (it->second.deletedBy)
    return error(inst) << "uses ref " << ref << " after instruction "
                       << it->second.deletedBy->id() << " deleted it";
  return it->second.value;
}

FailureOr<RankedTensorType>
TraceImporter::localType(const plan::TensorMeta &meta,
                         const plan::Instruction &inst, StringRef what) {
  Type element = elementType(meta.dtype(), b);
  if (!element)
    return error(inst) << what << " has no dtype ("
                       << plan::DType_Name(meta.dtype()) << ")";
  SmallVector<int64_t> shape(meta.shape().begin(), meta.shape().end());
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return error(inst) << what << " has a negative size";
  return RankedTensorType::get(shape, element);
}

FailureOr<RankedTensorType>
TraceImporter::newRefType(int64_t ref, const plan::Instruction &inst,
                          RankedTensorType fallback) {
  auto it = refTypes.find(ref);
  if (it == refTypes.end()) {
    if (fallback)
      return fallback;
    return error(inst) << "defines ref " << ref
                       << ", which has no type in TracedProgram.refs";
  }
  FailureOr<RankedTensorType> type = localType(
      it->second->meta(), inst, "the type of ref " + std::to_string(ref));
  if (failed(type))
    return failure();
  if (fallback && *type != fallback)
    return error(inst) << "ref " << ref << " is recorded as " << *type
                       << " but the instruction makes a " << fallback;
  return *type;
}

LogicalResult TraceImporter::checkNewRef(int64_t ref,
                                         const plan::Instruction &inst) {
  if (ref < 0)
    return error(inst) << "defines ref " << ref << " (refs are >= 0)";
  if (auto it = refs.find(ref); it != refs.end())
    return error(inst) << "defines ref " << ref << ", which instruction "
                       << it->second.definedBy->id() << " already defines";
  // Ref ids are unique in the whole program, bodies included.
  if (recording)
    if (auto it = callerRefs->find(ref); it != callerRefs->end())
      return error(inst) << "defines ref " << ref << ", which instruction "
                         << it->second.definedBy->id()
                         << " of the caller already defines";
  if (auto it = bodyRefs.find(ref); it != bodyRefs.end())
    return error(inst) << "defines ref " << ref << ", which the body of "
                       << "recording " << it->second << " already defines";
  return success();
}

void TraceImporter::define(int64_t ref, Value value,
                           const plan::Instruction &inst) {
  RefInfo &info = refs[ref];
  info.value = value;
  if (!info.definedBy)
    info.definedBy = &inst;
  if (recording && !bodyFormals.contains(ref))
    bodyRefs.try_emplace(ref, recording->id());
}

DTensorType TraceImporter::tensorType(RankedTensorType local,
                                      const MeshInfo &mesh,
                                      const StreamInfo &stream) {
  return DTensorType::get(&context, local, mesh.type, StringAttr())
      .withStream(stream.name);
}

const MeshInfo *TraceImporter::meshOfValue(Value tensor) {
  // The ref's mesh is the mesh of the op that made the tensor, looked up by
  // the IR the importer built (aliases keep their input's).
  if (Value m = getDefiningMesh(tensor)) {
    for (auto &[id, info] : meshes)
      if (info.value == m)
        return &info;
    return nullptr;
  }
  // A formal or a call result, possibly through ops that keep their input's
  // mesh (as getDefiningMesh looks through them), up to the same bound.
  for (int depth = 0; depth < 64 && tensor; ++depth) {
    if (auto it = valueMeshes.find(tensor); it != valueMeshes.end())
      return it->second;
    Operation *def = tensor.getDefiningOp();
    if (auto op = dyn_cast_if_present<ReduceOp>(def))
      tensor = op.getInput();
    else if (auto op = dyn_cast_if_present<BorrowOp>(def))
      tensor = op.getInput();
    else
      return nullptr;
  }
  return nullptr;
}

LogicalResult TraceImporter::verifyNew(Operation *op,
                                       const plan::Instruction &inst) {
  std::string messages;
  LogicalResult verified = success();
  {
    ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error) {
        if (!messages.empty())
          messages += "; ";
        messages += diag.str();
      }
      return success();
    });
    verified = verify(op, /*verifyRecursively=*/false);
  }
  if (failed(verified))
    return error(inst) << "gives IR that does not verify: " << messages;
  return success();
}

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

FailureOr<Value> TraceImporter::importConstant(const plan::TensorData &data,
                                               const plan::Instruction &inst,
                                               const Twine &what) {
  if (data.shape_size() != 0)
    return error(inst) << what << " is a constant tensor of "
                       << data.shape_size()
                       << " dims: only 0-d constants (Python numbers) are "
                          "supported yet";
  Type element = elementType(data.dtype(), b);
  std::optional<DType> dtype = dialectDType(data.dtype());
  if (!element || !dtype)
    return error(inst) << what << " is a constant of no dtype ("
                       << plan::DType_Name(data.dtype()) << ")";
  const std::string &bytes = data.data();
  unsigned width = isa<ComplexType>(element)
                       ? 2 * cast<ComplexType>(element)
                                 .getElementType()
                                 .getIntOrFloatBitWidth()
                       : std::max(8u, element.getIntOrFloatBitWidth());
  if (bytes.size() * 8 != width)
    return error(inst) << what << " is a " << element << " constant of "
                       << bytes.size() << " bytes, expected " << width / 8;
  // The value as the old tracer wrote it: `#monarch.scalar<...>` of a
  // Python bool, int or float.
  Attribute scalar;
  auto load = [&](auto x) {
    std::memcpy(&x, bytes.data(), sizeof(x));
    return x;
  };
  switch (data.dtype()) {
  case plan::BOOL:
    scalar = b.getBoolAttr(load(uint8_t()) != 0);
    break;
  case plan::UINT8:
    scalar = b.getI64IntegerAttr(load(uint8_t()));
    break;
  case plan::INT8:
    scalar = b.getI64IntegerAttr(load(int8_t()));
    break;
  case plan::INT16:
    scalar = b.getI64IntegerAttr(load(int16_t()));
    break;
  case plan::INT32:
    scalar = b.getI64IntegerAttr(load(int32_t()));
    break;
  case plan::INT64:
    scalar = b.getI64IntegerAttr(load(int64_t()));
    break;
  case plan::FLOAT32:
    scalar = b.getF64FloatAttr(load(float()));
    break;
  case plan::FLOAT64:
    scalar = b.getF64FloatAttr(load(double()));
    break;
  case plan::FLOAT16:
  case plan::BFLOAT16: {
    llvm::APFloat f(data.dtype() == plan::FLOAT16 ? llvm::APFloat::IEEEhalf()
                                                  : llvm::APFloat::BFloat(),
                    llvm::APInt(16, load(uint16_t())));
    bool lost;
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
              &lost);
    scalar = b.getF64FloatAttr(f.convertToDouble());
    break;
  }
  default:
    return error(inst) << what << " is a " << element
                       << " constant, which has no Scalar form";
  }
  FailureOr<Value> mesh = meshValue(inst.mesh(), inst);
  FailureOr<StreamInfo *> stream = streamInfo(inst.stream(), inst);
  if (failed(mesh) || failed(stream))
    return failure();
  MeshInfo &m = meshes.at(inst.mesh());
  Attribute none = NoneAttr::get(&context);
  auto op = AtenOp::create(
      b, opLoc(inst),
      TypeRange{tensorType(RankedTensorType::get({}, element), m, **stream)},
      "aten::scalar_tensor", ValueRange{},
      b.getArrayAttr({ScalarAttr::get(&context, scalar),
                      DTypeAttr::get(&context, *dtype), none, none, none}),
      *mesh);
  if (failed(verifyNew(op, inst)))
    return failure();
  return op.getResult(0);
}

LogicalResult TraceImporter::importValue(const plan::Value &v,
                                         const plan::Instruction &inst,
                                         const Twine &what, ArgList &args) {
  auto tensor = [&](int64_t ref) -> LogicalResult {
    FailureOr<Value> value = use(ref, inst);
    if (failed(value))
      return failure();
    args.tensors.push_back(*value);
    args.refs.push_back(ref);
    return success();
  };
  switch (v.kind_case()) {
  case plan::Value::kRef:
    if (failed(tensor(v.ref())))
      return failure();
    args.attrs.push_back(OperandAttr::get(&context));
    return success();
  case plan::Value::kRefList:
    for (int64_t r : v.ref_list().refs())
      if (failed(tensor(r)))
        return failure();
    args.attrs.push_back(
        OperandListAttr::get(&context, v.ref_list().refs_size()));
    return success();
  case plan::Value::kList: {
    const auto &items = v.list().values();
    // Tensor?[] (refs, nones and 0-d constants): `[%a, #monarch.none]`,
    // which parses as a Tensor[] when every entry is a tensor.
    if (llvm::all_of(items, [](const plan::Value &i) {
          return i.has_ref() || i.has_none() || i.has_tensor();
        })) {
      SmallVector<bool> present;
      for (auto [k, item] : llvm::enumerate(items)) {
        if (item.has_none()) {
          present.push_back(false);
          continue;
        }
        present.push_back(true);
        if (item.has_ref()) {
          if (failed(tensor(item.ref())))
            return failure();
          continue;
        }
        FailureOr<Value> c =
            importConstant(item.tensor(), inst, what + " entry #" + Twine(k));
        if (failed(c))
          return failure();
        args.tensors.push_back(*c);
      }
      if (llvm::all_of(present, [](bool p) { return p; }))
        args.attrs.push_back(
            OperandListAttr::get(&context, static_cast<int64_t>(items.size())));
      else
        args.attrs.push_back(OptionalOperandListAttr::get(
            &context, DenseBoolArrayAttr::get(&context, present)));
      return success();
    }
    // A list of numbers: the dense arrays the old tracer wrote.
    auto isInt = [](const plan::Value &i) {
      return i.has_int_value() ||
             (i.has_scalar() && i.scalar().has_int_value());
    };
    auto isFloat = [](const plan::Value &i) {
      return i.has_float_value() ||
             (i.has_scalar() && i.scalar().has_float_value());
    };
    auto isBool = [](const plan::Value &i) {
      return i.has_bool_value() ||
             (i.has_scalar() && i.scalar().has_bool_value());
    };
    auto intOf = [](const plan::Value &i) {
      return i.has_scalar() ? i.scalar().int_value() : i.int_value();
    };
    auto floatOf = [&](const plan::Value &i) {
      if (isInt(i))
        return static_cast<double>(intOf(i));
      return i.has_scalar() ? i.scalar().float_value() : i.float_value();
    };
    if (llvm::all_of(items, isBool)) {
      SmallVector<bool> values;
      for (const plan::Value &i : items)
        values.push_back(i.has_scalar() ? i.scalar().bool_value()
                                        : i.bool_value());
      args.attrs.push_back(b.getDenseBoolArrayAttr(values));
      return success();
    }
    if (llvm::all_of(items, isInt)) {
      SmallVector<int64_t> values;
      for (const plan::Value &i : items)
        values.push_back(intOf(i));
      args.attrs.push_back(b.getDenseI64ArrayAttr(values));
      return success();
    }
    if (llvm::all_of(items, [&](const plan::Value &i) {
          return isInt(i) || isFloat(i);
        })) {
      SmallVector<double> values;
      for (const plan::Value &i : items)
        values.push_back(floatOf(i));
      args.attrs.push_back(b.getDenseF64ArrayAttr(values));
      return success();
    }
    return error(inst) << what
                       << " is a list that monarch.aten cannot hold (only "
                          "tensors and Nones, or numbers of one kind)";
  }
  case plan::Value::kIntValue:
    args.attrs.push_back(b.getI64IntegerAttr(v.int_value()));
    return success();
  case plan::Value::kFloatValue:
    args.attrs.push_back(b.getF64FloatAttr(v.float_value()));
    return success();
  case plan::Value::kBoolValue:
    args.attrs.push_back(b.getBoolAttr(v.bool_value()));
    return success();
  case plan::Value::kStringValue:
    args.attrs.push_back(b.getStringAttr(v.string_value()));
    return success();
  case plan::Value::kIntList:
    args.attrs.push_back(b.getDenseI64ArrayAttr(SmallVector<int64_t>(
        v.int_list().values().begin(), v.int_list().values().end())));
    return success();
  case plan::Value::kFloatList:
    args.attrs.push_back(b.getDenseF64ArrayAttr(SmallVector<double>(
        v.float_list().values().begin(), v.float_list().values().end())));
    return success();
  case plan::Value::kBoolList:
    args.attrs.push_back(b.getDenseBoolArrayAttr(SmallVector<bool>(
        v.bool_list().values().begin(), v.bool_list().values().end())));
    return success();
  case plan::Value::kDtype: {
    std::optional<DType> d = dialectDType(v.dtype());
    if (!d)
      return error(inst) << what << " is dtype " << plan::DType_Name(v.dtype());
    args.attrs.push_back(DTypeAttr::get(&context, *d));
    return success();
  }
  case plan::Value::kDevice:
    args.attrs.push_back(
        DeviceAttr::get(&context, b.getStringAttr(v.device().spec())));
    return success();
  case plan::Value::kLayout: {
    std::optional<TorchLayout> l = dialectLayout(v.layout());
    if (!l)
      return error(inst) << what << " is an unknown layout (" << v.layout()
                         << ")";
    args.attrs.push_back(TorchLayoutAttr::get(&context, *l));
    return success();
  }
  case plan::Value::kMemoryFormat: {
    std::optional<MemoryFormat> f = dialectMemoryFormat(v.memory_format());
    if (!f)
      return error(inst) << what << " is an unknown memory format ("
                         << v.memory_format() << ")";
    args.attrs.push_back(MemoryFormatAttr::get(&context, *f));
    return success();
  }
  case plan::Value::kNone:
    args.attrs.push_back(NoneAttr::get(&context));
    return success();
  case plan::Value::kScalar: {
    Attribute inner;
    switch (v.scalar().kind_case()) {
    case plan::Scalar::kIntValue:
      inner = b.getI64IntegerAttr(v.scalar().int_value());
      break;
    case plan::Scalar::kFloatValue:
      inner = b.getF64FloatAttr(v.scalar().float_value());
      break;
    case plan::Scalar::kBoolValue:
      inner = b.getBoolAttr(v.scalar().bool_value());
      break;
    default:
      return error(inst) << what << " is a Scalar with no value";
    }
    args.attrs.push_back(ScalarAttr::get(&context, inner));
    return success();
  }
  case plan::Value::kOptional:
    if (!v.optional().has_value()) {
      args.attrs.push_back(NoneAttr::get(&context));
      return success();
    }
    return importValue(v.optional().value(), inst, what, args);
  case plan::Value::kTensor: {
    FailureOr<Value> c = importConstant(v.tensor(), inst, what);
    if (failed(c))
      return failure();
    args.tensors.push_back(*c);
    args.attrs.push_back(OperandAttr::get(&context));
    return success();
  }
  default:
    return error(inst) << what << " has no value";
  }
}

LogicalResult TraceImporter::importArgs(const plan::Instruction &inst,
                                        ArrayRef<const plan::Value *> values,
                                        ArrayRef<std::string> names,
                                        ArgList &args) {
  for (auto [i, v] : llvm::enumerate(values)) {
    std::string what = names.empty() || names[i].empty()
                           ? "argument #" + std::to_string(i)
                           : "argument '" + names[i] + "'";
    if (failed(importValue(*v, inst, what, args)))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

LogicalResult TraceImporter::importCall(const plan::Instruction &inst,
                                        bool isAten) {
  const auto &argValues =
      isAten ? inst.call_op().args() : inst.call_function().args();
  const auto &results =
      isAten ? inst.call_op().results() : inst.call_function().results();
  std::string name =
      isAten ? inst.call_op().name() : inst.call_function().name();
  if (isAten && !inst.call_op().overload().empty())
    name += "." + inst.call_op().overload();

  // monarch.aten takes every argument positionally, in schema order: with a
  // schema, keyword arguments go to their places and defaults fill the rest
  // (the old tracer did the same from the op's torch schema).
  static const plan::Value *noneValue = [] {
    auto *v = new plan::Value();
    v->mutable_none();
    return v;
  }();
  SmallVector<const plan::Value *> values;
  SmallVector<std::string> names;
  const plan::OpSchema *schema = isAten ? schemas.lookup(name) : nullptr;
  if (schema) {
    int n = schema->arguments_size();
    if (argValues.size() > n)
      return error(inst) << "passes " << argValues.size()
                         << " positional arguments to '" << name
                         << "', whose schema has " << n;
    values.assign(n, nullptr);
    for (int i = 0; i < argValues.size(); ++i)
      values[i] = &argValues[i];
    for (const plan::NamedValue &kw : inst.call_op().kwargs()) {
      int index = -1;
      for (int i = 0; i < n; ++i)
        if (schema->arguments(i).name() == kw.name())
          index = i;
      if (index < 0)
        return error(inst) << "passes keyword argument '" << kw.name()
                           << "', which the schema of '" << name
                           << "' does not have";
      if (values[index])
        return error(inst) << "passes argument '" << kw.name() << "' twice";
      values[index] = &kw.value();
    }
    for (int i = 0; i < n; ++i) {
      names.push_back(schema->arguments(i).name());
      if (!values[i])
        values[i] = schema->arguments(i).has_default_value()
                        ? &schema->arguments(i).default_value()
                        : noneValue;
    }
  } else {
    if (isAten && inst.call_op().kwargs_size()) {
      InFlightDiagnostic diag = error(inst);
      diag << "passes keyword arguments (";
      llvm::interleaveComma(
          inst.call_op().kwargs(), diag,
          [&](const plan::NamedValue &kw) { diag << kw.name(); });
      return diag << ") to '" << name
                  << "' but the trace has no schema for it "
                     "(TracedProgram.schemas): monarch.aten holds every "
                     "argument positionally";
    }
    for (const plan::Value &v : argValues)
      values.push_back(&v);
  }

  FailureOr<Value> mesh = meshValue(inst.mesh(), inst);
  FailureOr<StreamInfo *> stream = streamInfo(inst.stream(), inst);
  if (failed(mesh) || failed(stream))
    return failure();
  ArgList args;
  if (failed(importArgs(inst, values, names, args)))
    return failure();

  // A result that is a ref the op takes is the op writing it in place
  // (`add_`, `out=`): a new SSA value that now holds the ref, as the old
  // tracer wrote it. Any other ref defined before is defined twice.
  SmallVector<Type> resultTypes;
  SmallVector<bool> rebinds;
  for (auto [k, r] : llvm::enumerate(results)) {
    if (llvm::is_contained(ArrayRef(results.data(), k), r))
      return error(inst) << "names ref " << r << " twice among its results";
    if (refs.count(r) && llvm::is_contained(args.refs, r)) {
      resultTypes.push_back(refs[r].value.getType());
      rebinds.push_back(true);
      continue;
    }
    if (failed(checkNewRef(r, inst)))
      return failure();
    FailureOr<RankedTensorType> local = newRefType(r, inst);
    if (failed(local))
      return failure();
    resultTypes.push_back(tensorType(*local, meshes.at(inst.mesh()), **stream));
    rebinds.push_back(false);
  }

  Operation *op;
  if (isAten) {
    op = AtenOp::create(b, opLoc(inst), resultTypes, name, args.tensors,
                        b.getArrayAttr(args.attrs), *mesh);
  } else {
    op = CallFunctionOp::create(b, opLoc(inst), resultTypes, name, args.tensors,
                                b.getArrayAttr(args.attrs), *mesh);
    // A by-value definition (the cloudpickle of a __main__ function) travels
    // with the op, and the plan lowering writes it back.
    if (!inst.call_function().definition().empty())
      op->setAttr("monarch.definition",
                  b.getStringAttr(inst.call_function().definition()));
  }
  if (failed(verifyNew(op, inst)))
    return failure();
  for (auto [r, result] : llvm::zip(results, op->getResults()))
    define(r, result, inst);
  return success();
}

LogicalResult TraceImporter::importRank(const plan::Instruction &inst) {
  const plan::RankTensor &rank = inst.rank_tensor();
  FailureOr<Value> mesh = meshValue(inst.mesh(), inst);
  FailureOr<StreamInfo *> stream = streamInfo(inst.stream(), inst);
  if (failed(mesh) || failed(stream) ||
      failed(checkNewRef(rank.result(), inst)))
    return failure();
  const MeshInfo &m = meshes.at(inst.mesh());
  // No dims: every dim of the mesh (the plan's meaning), which the dialect
  // spells out.
  SmallVector<Attribute> dims;
  for (const std::string &d : rank.dims())
    dims.push_back(b.getStringAttr(d));
  if (dims.empty())
    for (const std::string &d : m.view.names())
      dims.push_back(b.getStringAttr(d));
  FailureOr<RankedTensorType> local = newRefType(
      rank.result(), inst, RankedTensorType::get({}, b.getI64Type()));
  if (failed(local))
    return failure();
  auto op = RankOp::create(b, opLoc(inst), tensorType(*local, m, **stream),
                           *mesh, b.getArrayAttr(dims));
  if (failed(verifyNew(op, inst)))
    return failure();
  define(rank.result(), op.getResult(), inst);
  return success();
}

LogicalResult TraceImporter::importReduce(const plan::Instruction &inst) {
  const plan::Reduce &r = inst.reduce();
  FailureOr<Value> input = use(r.input(), inst);
  FailureOr<MeshInfo *> mesh = meshInfo(inst.mesh(), inst, "mesh");
  FailureOr<StreamInfo *> stream = streamInfo(inst.stream(), inst);
  if (failed(input) || failed(mesh) || failed(stream))
    return failure();
  auto inputType = cast<DTensorType>(input->getType());
  // Dims are the instruction's mesh's; the dialect's are the input's.
  if (const MeshInfo *of = meshOfValue(*input); of && of->view != (*mesh)->view)
    return error(inst) << "runs on mesh " << inst.mesh() << " ["
                       << (*mesh)->view.layoutString() << "] but ref "
                       << r.input() << " lives on [" << of->view.layoutString()
                       << "]";
  std::optional<ReductionKind> kind = dialectReduction(r.op());
  if (!kind)
    return error(inst) << "unknown reduction " << r.op();
  if (r.has_input_meta()) {
    FailureOr<RankedTensorType> meta =
        localType(r.input_meta(), inst, "input_meta");
    if (failed(meta))
      return failure();
    if (*meta != inputType.getLocal())
      return error(inst) << "input_meta says " << *meta << " but ref "
                         << r.input() << " is " << inputType.getLocal();
  }
  Value out;
  if (r.has_out()) {
    FailureOr<Value> o = use(r.out(), inst);
    if (failed(o))
      return failure();
    out = *o;
  }
  // In place and `out=` write an existing tensor: the ref stays on it (the
  // old tracer's uses kept naming the input / the out tensor), unless the
  // plan gives the result a ref of its own (the plan lowering's `out=`).
  bool defines = !r.in_place() && !(out && r.result() == r.out());
  Type resultType;
  if (r.in_place()) {
    resultType = inputType;
  } else if (out) {
    resultType = out.getType();
  } else {
    // The table of DESIGN.md §6.2, for traces that leave the type out.
    SmallVector<int64_t> shape(inputType.getShape());
    int64_t n = 1;
    bool known = true;
    if (r.dims_size() == 0)
      n = (*mesh)->view.size();
    for (const std::string &d : r.dims()) {
      auto size = (*mesh)->view.size(d);
      known &= size.ok();
      n *= size.ok() ? *size : 1;
    }
    bool stack = *kind == ReductionKind::stack;
    if (known && r.scatter() && !stack && !shape.empty())
      shape.erase(shape.begin());
    else if (known && stack && !r.scatter())
      shape.insert(shape.begin(), n);
    RankedTensorType fallback =
        RankedTensorType::get(shape, inputType.getLocal().getElementType());
    if (failed(checkNewRef(r.result(), inst)))
      return failure();
    FailureOr<RankedTensorType> local =
        refTypes.count(r.result()) ? newRefType(r.result(), inst)
                                   : FailureOr<RankedTensorType>(fallback);
    if (failed(local))
      return failure();
    resultType = tensorType(*local, **mesh, **stream);
  }
  if (defines && out && failed(checkNewRef(r.result(), inst)))
    return failure();
  SmallVector<Attribute> dims;
  for (const std::string &d : r.dims())
    dims.push_back(b.getStringAttr(d));
  auto op =
      ReduceOp::create(b, opLoc(inst), resultType, *input, b.getArrayAttr(dims),
                       *kind, r.scatter(), r.in_place(), out);
  if (failed(verifyNew(op, inst)))
    return failure();
  if (defines)
    define(r.result(), op.getResult(), inst);
  return success();
}

LogicalResult TraceImporter::importSend(const plan::Instruction &inst) {
  const plan::SendTensor &s = inst.send_tensor();
  FailureOr<Value> input = use(s.input(), inst);
  FailureOr<MeshInfo *> source = meshInfo(s.source_mesh(), inst, "source_mesh");
  FailureOr<MeshInfo *> destInfo = meshInfo(s.dest_mesh(), inst, "dest_mesh");
  FailureOr<StreamInfo *> stream = streamInfo(inst.stream(), inst);
  if (failed(input) || failed(source) || failed(destInfo) || failed(stream) ||
      failed(checkNewRef(s.result(), inst)))
    return failure();
  auto inputType = cast<DTensorType>(input->getType());
  if (s.has_meta()) {
    FailureOr<RankedTensorType> meta = localType(s.meta(), inst, "meta");
    if (failed(meta))
      return failure();
    if (*meta != inputType.getLocal())
      return error(inst) << "meta says " << *meta << " but ref " << s.input()
                         << " is " << inputType.getLocal();
  }
  // Sending from part of the input's mesh is `t.slice_mesh(...).to_mesh()`.
  Value from = *input;
  const MeshInfo *of = meshOfValue(*input);
  if (!of)
    return error(inst) << "the mesh of ref " << s.input() << " is unknown";
  if (of->view != (*source)->view) {
    std::optional<SliceSpec> spec = sliceOf(of->view, (*source)->view, b);
    if (!spec)
      return error(inst) << "source_mesh " << s.source_mesh() << " ["
                         << (*source)->view.layoutString()
                         << "] is not a slice of the mesh of ref " << s.input()
                         << " [" << of->view.layoutString() << "]";
    auto slice = SliceMeshOp::create(
        b, opLoc(inst), inputType.withMesh((*source)->type), *input,
        b.getArrayAttr(spec->dims), spec->starts, spec->stops, spec->steps);
    if (failed(verifyNew(slice, inst)))
      return failure();
    from = slice.getResult();
  }
  FailureOr<RankedTensorType> local =
      newRefType(s.result(), inst, inputType.getLocal());
  FailureOr<Value> dest = meshValue(s.dest_mesh(), inst);
  if (failed(local) || failed(dest))
    return failure();
  auto op = ToMeshOp::create(
      b, opLoc(inst), tensorType(*local, **destInfo, **stream), from, *dest);
  if (failed(verifyNew(op, inst)))
    return failure();
  define(s.result(), op.getResult(), inst);
  return success();
}

LogicalResult TraceImporter::importBorrow(const plan::Instruction &inst) {
  const plan::BorrowCreate &c = inst.borrow_create();
  FailureOr<Value> input = use(c.input(), inst);
  FailureOr<StreamInfo *> from = streamInfo(c.from_stream(), inst);
  FailureOr<StreamInfo *> to = streamInfo(inst.stream(), inst);
  if (failed(input) || failed(from) || failed(to) ||
      failed(checkNewRef(c.result(), inst)))
    return failure();
  if (borrows.count(c.borrow()))
    return error(inst) << "borrow " << c.borrow() << " is created twice";
  auto inputType = cast<DTensorType>(input->getType());
  if (inputType.getStreamName() != (*from)->name)
    return error(inst) << "from_stream " << c.from_stream()
                       << " is not the stream of ref " << c.input();
  FailureOr<RankedTensorType> local =
      newRefType(c.result(), inst, inputType.getLocal());
  FailureOr<Value> stream = streamValue(inst.stream(), inst);
  if (failed(local) || failed(stream))
    return failure();
  auto op = BorrowOp::create(b, opLoc(inst), inputType.withStream((*to)->name),
                             BorrowType::get(&context), *input, *stream,
                             c.mutable_());
  if (failed(verifyNew(op, inst)))
    return failure();
  define(c.result(), op.getResult(), inst);
  borrows[c.borrow()] = op.getBorrow();
  return success();
}

LogicalResult TraceImporter::importBorrowEvent(const plan::Instruction &inst) {
  int64_t id = inst.has_borrow_first_use()  ? inst.borrow_first_use().borrow()
               : inst.has_borrow_last_use() ? inst.borrow_last_use().borrow()
                                            : inst.borrow_drop().borrow();
  auto it = borrows.find(id);
  if (it == borrows.end())
    return error(inst) << "names borrow " << id
                       << ", which no borrow_create made";
  Location loc = opLoc(inst);
  Operation *op;
  if (inst.has_borrow_first_use())
    op = BorrowFirstUseOp::create(b, loc, it->second);
  else if (inst.has_borrow_last_use())
    op = BorrowLastUseOp::create(b, loc, it->second);
  else
    op = BorrowDropOp::create(b, loc, it->second);
  return verifyNew(op, inst);
}

LogicalResult TraceImporter::importFetch(const plan::Instruction &inst) {
  FailureOr<Value> input = use(inst.fetch().ref(), inst);
  FailureOr<MeshInfo *> mesh = meshInfo(inst.mesh(), inst, "mesh");
  if (failed(input) || failed(mesh))
    return failure();
  // The eager path fetches one rank through the 0-d mesh of that rank: its
  // coordinates in the tensor's mesh are fetch_shard's.
  const MeshView &view = (*mesh)->view;
  if (view.size() != 1)
    return error(inst) << "fetches from mesh " << inst.mesh() << " of "
                       << view.size()
                       << " ranks: the dialect fetches one rank (fetch_shard)";
  const MeshInfo *of = meshOfValue(*input);
  if (!of)
    return error(inst) << "the mesh of ref " << inst.fetch().ref()
                       << " is unknown";
  std::optional<std::vector<int64_t>> coords = of->view.coordsOf(view.offset());
  if (!coords)
    return error(inst) << "fetches rank " << view.offset()
                       << ", which is not on the mesh of ref "
                       << inst.fetch().ref() << " [" << of->view.layoutString()
                       << "]";
  SmallVector<Attribute> dims;
  for (const std::string &d : of->view.names())
    dims.push_back(b.getStringAttr(d));
  auto inputType = cast<DTensorType>(input->getType());
  auto op = FetchShardOp::create(b, opLoc(inst),
                                 HostType::get(&context, inputType.getLocal()),
                                 *input, b.getArrayAttr(dims), *coords);
  return verifyNew(op, inst);
}

//===----------------------------------------------------------------------===//
// Recordings
//===----------------------------------------------------------------------===//

// A recording (plan.proto's DefineRecording) is `monarch.compile(step)` traced
// once: its formals are refs of the caller that the body reads or writes, its
// results refs the body defines. It becomes
//
//   func.func private @recording_ID(%root: !monarch.mesh<...>, %formal...)
//       -> (result types)
//
// whose body is imported like the program's, with the root mesh as its first
// argument (views are made from it, as at the top level from
// monarch.spawn_procs) and the formals bound to the other arguments. A
// CallRecording is `func.call @recording_ID(%root, %actuals...)`. The dialect
// passes tensors by reference: a body writing a formal in place (an
// optimizer's `p.sub_(...)`) writes the caller's tensor, which the caller's
// value names after the call; the plan lowering (lowerCall) binds each formal
// to its actual's ref, so the plan keeps that.

LogicalResult
TraceImporter::importDefineRecording(const plan::Instruction &inst) {
  const plan::Recording &rec = inst.define_recording().recording();
  if (recording)
    return error(inst) << "defines recording " << rec.id()
                       << " inside the body of recording " << recording->id()
                       << ": nested definitions are not supported (define it "
                          "at the top level; a body may call it)";
  if (recordings.count(rec.id()))
    return error(inst) << "recording " << rec.id() << " is defined twice";

  // Formals name the caller's refs, live at the definition; their types are
  // the function's argument types.
  RecordingInfo info;
  info.argTypes.push_back(meshes.at(0).type);
  for (auto [k, f] : llvm::enumerate(rec.formals())) {
    if (llvm::is_contained(ArrayRef(rec.formals().data(), k), f))
      return error(inst) << "recording " << rec.id() << " names ref " << f
                         << " twice among its formals";
    auto it = refs.find(f);
    if (it == refs.end())
      return error(inst) << "formal ref " << f << " of recording " << rec.id()
                         << " is not defined before the recording (formals "
                            "are refs of the caller that the body uses)";
    if (it->second.deletedBy)
      return error(inst) << "formal ref " << f << " of recording " << rec.id()
                         << " was deleted by instruction "
                         << it->second.deletedBy->id();
    info.argTypes.push_back(it->second.value.getType());
    info.formalMeshes.push_back(meshOfValue(it->second.value));
  }

  Location loc = opLoc(inst);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entryFunc);
  std::string name = "recording_" + std::to_string(rec.id());
  auto fn =
      func::FuncOp::create(b, loc, name, b.getFunctionType(info.argTypes, {}));
  fn.setPrivate();
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToEnd(body);

  // The body's scope: its formals, the root as its first argument, and no
  // mesh, stream or borrow value of the caller's (they live in another
  // function); all of it restored on the way out.
  std::unordered_map<int64_t, RefInfo> scope;
  for (auto [k, f] : llvm::enumerate(rec.formals())) {
    BlockArgument arg = body->getArgument(k + 1);
    scope[f] = RefInfo{arg, &inst, nullptr};
    valueMeshes[arg] = info.formalMeshes[k];
  }
  std::map<int64_t, Value> callerMeshes, callerStreams;
  for (auto &[id, m] : meshes)
    callerMeshes[id] = std::exchange(m.value, Value());
  for (auto &[id, s] : streams)
    callerStreams[id] = std::exchange(s.value, Value());
  meshes.at(0).value = body->getArgument(0);
  std::unordered_map<int64_t, Value> callerBorrows;
  std::swap(borrows, callerBorrows);
  std::swap(refs, scope);
  callerRefs = &scope;
  recording = &rec;
  bodyFormals.clear();
  bodyFormals.insert(rec.formals().begin(), rec.formals().end());
  llvm::scope_exit restore([&] {
    std::swap(refs, scope);
    callerRefs = nullptr;
    recording = nullptr;
    bodyFormals.clear();
    std::swap(borrows, callerBorrows);
    for (auto &[id, m] : meshes)
      m.value = callerMeshes[id];
    for (auto &[id, s] : streams)
      s.value = callerStreams[id];
  });

  for (const plan::Instruction &b : rec.body())
    if (failed(importInstruction(b)))
      return failure();

  // Results: distinct refs the body defines, live at its end.
  SmallVector<Value> results;
  for (auto [k, r] : llvm::enumerate(rec.results())) {
    if (llvm::is_contained(ArrayRef(rec.results().data(), k), r))
      return error(inst) << "recording " << rec.id() << " names ref " << r
                         << " twice among its results";
    if (bodyFormals.contains(r))
      return error(inst) << "result ref " << r << " of recording " << rec.id()
                         << " is one of its formals: results are refs the "
                            "body defines";
    auto it = refs.find(r);
    if (it == refs.end())
      return error(inst) << "result ref " << r << " of recording " << rec.id()
                         << " is not defined by its body";
    if (it->second.deletedBy)
      return error(inst) << "result ref " << r << " of recording " << rec.id()
                         << " is deleted by instruction "
                         << it->second.deletedBy->id() << " of its body";
    results.push_back(it->second.value);
    info.resultMeshes.push_back(meshOfValue(it->second.value));
  }
  func::ReturnOp::create(b, loc, results);
  fn.setFunctionType(
      b.getFunctionType(info.argTypes, ValueRange(results).getTypes()));
  info.func = fn;
  recordings.emplace(rec.id(), std::move(info));
  return success();
}

LogicalResult
TraceImporter::importCallRecording(const plan::Instruction &inst) {
  const plan::CallRecording &call = inst.call_recording();
  auto it = recordings.find(call.recording());
  if (it == recordings.end())
    return error(inst) << "calls recording " << call.recording()
                       << ", which no earlier define_recording defines";
  RecordingInfo &rec = it->second;
  size_t formals = rec.formalMeshes.size(), results = rec.func.getNumResults();
  if (static_cast<size_t>(call.actuals_size()) != formals ||
      static_cast<size_t>(call.results_size()) != results)
    return error(inst) << "passes " << call.actuals_size() << " actuals and "
                       << call.results_size() << " results to recording "
                       << call.recording() << ", which takes " << formals
                       << " formals and " << results << " results";
  FailureOr<Value> root = meshValue(0, inst);
  if (failed(root))
    return failure();
  SmallVector<Value> operands{*root};
  for (auto [k, a] : llvm::enumerate(call.actuals())) {
    FailureOr<Value> actual = useActual(inst, rec, call.recording(), k, a);
    if (failed(actual))
      return failure();
    operands.push_back(*actual);
  }
  ArrayRef<int64_t> bound(call.results().data(), call.results_size());
  if (failed(declareResults(inst, rec, bound)))
    return failure();
  auto op = func::CallOp::create(b, opLoc(inst), rec.func, operands);
  if (failed(verifyNew(op, inst)))
    return failure();
  defineResults(inst, rec, bound, op.getResults());
  return success();
}

FailureOr<Value> TraceImporter::useActual(const plan::Instruction &inst,
                                          const RecordingInfo &rec, int64_t id,
                                          size_t k, int64_t ref) {
  FailureOr<Value> actual = use(ref, inst);
  if (failed(actual))
    return failure();
  Type formal = rec.argTypes[k + 1];
  if (actual->getType() != formal)
    return error(inst) << "actual #" << k << " (ref " << ref << ") is "
                       << actual->getType() << " but formal #" << k
                       << " of recording " << id << " is " << formal;
  const MeshInfo *want = rec.formalMeshes[k];
  if (const MeshInfo *have = meshOfValue(*actual);
      want && have && have->view != want->view)
    return error(inst) << "actual #" << k << " (ref " << ref << ") lives on ["
                       << have->view.layoutString() << "] but formal #" << k
                       << " of recording " << id << " on ["
                       << want->view.layoutString()
                       << "] (its body's instructions name their meshes)";
  return actual;
}

LogicalResult TraceImporter::declareResults(const plan::Instruction &inst,
                                            RecordingInfo &rec,
                                            ArrayRef<int64_t> results) {
  for (auto [k, r] : llvm::enumerate(results)) {
    if (llvm::is_contained(results.take_front(k), r))
      return error(inst) << "names ref " << r << " twice among its results";
    if (failed(checkNewRef(r, inst)))
      return failure();
    // The refs table must agree with the function's result type.
    auto type = cast<DTensorType>(rec.func.getResultTypes()[k]);
    if (failed(newRefType(r, inst, type.getLocal())))
      return failure();
  }
  return success();
}

void TraceImporter::defineResults(const plan::Instruction &inst,
                                  const RecordingInfo &rec,
                                  ArrayRef<int64_t> results,
                                  ValueRange values) {
  for (auto [k, r] : llvm::enumerate(results)) {
    define(r, values[k], inst);
    valueMeshes[values[k]] = rec.resultMeshes[k];
  }
}

// A loop (plan.proto's Loop: `trips` calls of a recording, values carried
// from one to the next) is the scf.for the plan lowering would make one loop
// instruction of again:
//
//   %r:N = scf.for %k = %lower to %upper step %step
//       iter_args(%c = <carried>...) -> (<carried types>) {
//     %i = monarch.index_tensor %k on %m : !monarch.tensor<i64, ...>
//     %o:N = func.call @recording_ID(%root, %c..., <captured>..., %i...)
//     scf.yield %o
//   }
//
// so that a traced job of n steps is one loop whatever n is.
LogicalResult TraceImporter::importLoop(const plan::Instruction &inst) {
  const plan::Loop &loop = inst.loop();
  auto it = recordings.find(loop.recording());
  if (it == recordings.end())
    return error(inst) << "loops over recording " << loop.recording()
                       << ", which no earlier define_recording defines";
  RecordingInfo &rec = it->second;
  size_t carried = loop.carried_size(), captured = loop.captured_size(),
         induction = loop.induction_size();
  size_t formals = rec.formalMeshes.size(), results = rec.func.getNumResults();
  if (formals != carried + captured + induction || results != carried ||
      static_cast<size_t>(loop.results_size()) != carried)
    return error(inst) << "carries " << carried << " values ("
                       << loop.results_size() << " results), captures "
                       << captured << " and has " << induction
                       << " induction tensors, but recording "
                       << loop.recording() << " takes " << formals
                       << " formals and gives " << results
                       << " results (formals: the carried values, the "
                          "captured ones, the induction tensors; one result "
                          "per carried value)";
  if (loop.trips() < 0 || loop.trips() > plan::Loop::MAX_TRIPS)
    return error(inst) << "has " << loop.trips()
                       << " trips; a loop makes 0 to "
                       << static_cast<int64_t>(plan::Loop::MAX_TRIPS);
  if (loop.step() <= 0)
    return error(inst) << "has step " << loop.step()
                       << "; a loop's step is positive";
  int64_t upper = 0;
  if (llvm::MulOverflow(loop.trips(), loop.step(), upper) ||
      llvm::AddOverflow(upper, loop.lower(), upper))
    return error(inst) << "counts past int64 (" << loop.lower() << " + "
                       << loop.trips() << " * " << loop.step() << ")";
  FailureOr<Value> root = meshValue(0, inst);
  if (failed(root))
    return failure();

  // Operands in the recording's order, checked against its formals.
  SmallVector<Value> init, capturedValues;
  for (auto [k, r] : llvm::enumerate(loop.carried())) {
    FailureOr<Value> v = useActual(inst, rec, loop.recording(), k, r);
    if (failed(v))
      return failure();
    if (rec.func.getResultTypes()[k] != v->getType())
      return error(inst) << "carries ref " << r << " of type " << v->getType()
                         << " into result #" << k << " of recording "
                         << loop.recording() << ", of type "
                         << rec.func.getResultTypes()[k];
    init.push_back(*v);
  }
  for (auto [k, r] : llvm::enumerate(loop.captured())) {
    FailureOr<Value> v = useActual(inst, rec, loop.recording(), carried + k, r);
    if (failed(v))
      return failure();
    capturedValues.push_back(*v);
  }
  SmallVector<std::pair<Value, DTensorType>> inductionMeshes;
  for (auto [k, ind] : llvm::enumerate(loop.induction())) {
    FailureOr<Value> mesh = meshValue(ind.mesh(), inst);
    FailureOr<StreamInfo *> stream = streamInfo(ind.stream(), inst);
    if (failed(mesh) || failed(stream))
      return failure();
    DTensorType type = tensorType(RankedTensorType::get({}, b.getI64Type()),
                                  meshes.at(ind.mesh()), **stream);
    if (type != rec.argTypes[carried + captured + k + 1])
      return error(inst) << "induction #" << k << " is " << type
                         << " but formal #" << carried + captured + k
                         << " of recording " << loop.recording() << " is "
                         << rec.argTypes[carried + captured + k + 1];
    inductionMeshes.emplace_back(*mesh, type);
  }
  ArrayRef<int64_t> bound(loop.results().data(), loop.results_size());
  if (failed(declareResults(inst, rec, bound)))
    return failure();

  Location loc = opLoc(inst);
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value lower = index(loop.lower()), upperValue = index(upper),
        step = index(loop.step());
  auto forOp = scf::ForOp::create(b, loc, lower, upperValue, step, init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    SmallVector<Value> operands{*root};
    llvm::append_range(operands, forOp.getRegionIterArgs());
    llvm::append_range(operands, capturedValues);
    for (auto &[mesh, type] : inductionMeshes) {
      auto i = IndexTensorOp::create(b, loc, type, forOp.getInductionVar(),
                                     mesh);
      if (failed(verifyNew(i, inst)))
        return failure();
      operands.push_back(i.getResult());
    }
    auto call = func::CallOp::create(b, loc, rec.func, operands);
    if (failed(verifyNew(call, inst)))
      return failure();
    // An empty loop body already ends in an implicit yield only when it
    // carries nothing; replace it with one of the call's results.
    if (!forOp.getBody()->empty() &&
        isa<scf::YieldOp>(forOp.getBody()->getTerminator()))
      forOp.getBody()->getTerminator()->erase();
    b.setInsertionPointToEnd(forOp.getBody());
    scf::YieldOp::create(b, loc, call.getResults());
  }
  if (failed(verifyNew(forOp, inst)))
    return failure();
  defineResults(inst, rec, bound, forOp.getResults());
  return success();
}

LogicalResult TraceImporter::importInstruction(const plan::Instruction &inst) {
  switch (inst.kind_case()) {
  case plan::Instruction::kCreateMesh:
    // Declared up front (views are made where first used); from here on
    // instructions may run on it.
    meshes.at(inst.create_mesh().mesh().id()).declared = true;
    return success();
  case plan::Instruction::kCreateStream: {
    StreamInfo &s = streams.at(inst.create_stream().stream().id());
    s.declared = true;
    return success(
        succeeded(streamValue(inst.create_stream().stream().id(), inst)));
  }
  case plan::Instruction::kCallOp:
    return importCall(inst, /*isAten=*/true);
  case plan::Instruction::kCallFunction:
    return importCall(inst, /*isAten=*/false);
  case plan::Instruction::kRankTensor:
    return importRank(inst);
  case plan::Instruction::kReduce:
    return importReduce(inst);
  case plan::Instruction::kSendTensor:
    return importSend(inst);
  case plan::Instruction::kBorrowCreate:
    return importBorrow(inst);
  case plan::Instruction::kBorrowFirstUse:
  case plan::Instruction::kBorrowLastUse:
  case plan::Instruction::kBorrowDrop:
    return importBorrowEvent(inst);
  case plan::Instruction::kFetch:
    return importFetch(inst);
  case plan::Instruction::kDeleteRefs:
    // SSA values die by themselves (the plan lowering frees each ref after
    // its last use). A later use of a deleted ref is a broken trace; refs
    // the trace never defined (made before tracing began) are ignored.
    for (int64_t r : inst.delete_refs().refs()) {
      // A plan's body that deletes a formal deletes the caller's actual.
      if (recording && bodyFormals.contains(r))
        return error(inst) << "deletes ref " << r << ", a formal of recording "
                           << recording->id()
                           << ": formals belong to the caller";
      if (auto it = refs.find(r); it != refs.end() && !it->second.deletedBy)
        it->second.deletedBy = &inst;
    }
    return success();
  case plan::Instruction::kRequestStatus:
    // A barrier reply for the eager controller: nothing in the program.
    return success();
  case plan::Instruction::kDefineRecording:
    return importDefineRecording(inst);
  case plan::Instruction::kCallRecording:
    return importCallRecording(inst);
  case plan::Instruction::kLoop:
    return importLoop(inst);
  case plan::Instruction::kCallActor:
    return error(inst)
           << "cannot import a call of endpoint '"
           << inst.call_actor().endpoint() << "' of actor '"
           << inst.call_actor().actor()
           << "': monarch.endpoint_call needs the actor mesh value "
              "(monarch.spawn_actor), which a trace does not record";
  default:
    return error(inst) << "the instruction has no kind";
  }
}

OwningOpRef<ModuleOp> TraceImporter::run() {
  if (trace.magic() != kTraceMagic) {
    error(trace) << "not a traced program: magic number 0x"
                 << llvm::utohexstr(trace.magic()) << ", expected 0x"
                 << llvm::utohexstr(kTraceMagic) << " (\"MONT\")";
    return {};
  }
  if (trace.version() == 0 || trace.version() > kTraceVersion) {
    error(trace) << "traced program version " << trace.version()
                 << " is not supported (this importer reads version "
                 << kTraceVersion << ")";
    return {};
  }
  if (failed(declareRoot()))
    return {};
  // Every declaration first, so that origins can be checked against the
  // views they must give; uses are checked in issue order.
  for (const plan::Mesh &m : program.meshes())
    if (failed(declareMesh(m, m)))
      return {};
  for (auto &[id, m] : meshes)
    m.declared = true;
  StreamInfo defaultStream;
  defaultStream.decl = &program;
  defaultStream.declared = true;
  streams.emplace(0, std::move(defaultStream));
  for (const plan::Stream &s : program.streams())
    if (failed(declareStream(s, s)))
      return {};
  for (auto &[id, s] : streams)
    s.declared = true;
  // create_mesh / create_stream anywhere, recording bodies included (a
  // compiled step may be the first to run on a mesh).
  std::function<LogicalResult(const pb::RepeatedPtrField<plan::Instruction> &)>
      declareIn = [&](const auto &list) -> LogicalResult {
    for (const plan::Instruction &inst : list) {
      if (inst.has_create_mesh() &&
          failed(declareMesh(inst.create_mesh().mesh(), inst)))
        return failure();
      if (inst.has_create_stream() &&
          failed(declareStream(inst.create_stream().stream(), inst)))
        return failure();
      if (inst.has_define_recording() &&
          failed(declareIn(inst.define_recording().recording().body())))
        return failure();
    }
    return success();
  };
  if (failed(declareIn(program.instructions())))
    return {};
  if (failed(checkOrigins()) || failed(collectRefTypes()) ||
      failed(collectSchemas()))
    return {};

  Location loc = UnknownLoc::get(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  std::string entry = trace.entry().empty() ? "main" : trace.entry();
  auto func = func::FuncOp::create(b, loc, entry, b.getFunctionType({}, {}));
  entryFunc = func;
  Block *body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);
  // Streams a plan declares up front are created up front, in id order.
  for (const plan::Stream &s : program.streams())
    streams.at(s.id()).value =
        StreamCreateOp::create(
            b, loc, StreamType::get(&context, b.getStringAttr(s.name())))
            .getResult();
  for (const plan::Instruction &inst : program.instructions())
    if (failed(importInstruction(inst)))
      return {};
  // A program that never uses its root still spawns it (its plan has one).
  if (!meshes.at(0).value) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(body);
    SpawnProcsOp::create(b, loc, meshes.at(0).type);
  }
  func::ReturnOp::create(b, loc);
  if (failed(verify(*module)))
    return {};
  return module;
}

} // namespace

OwningOpRef<ModuleOp> monarch::importTrace(const plan::TracedProgram &trace,
                                           MLIRContext &context,
                                           const TraceImportOptions &options) {
  context.getOrLoadDialect<MonarchDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  context.getOrLoadDialect<scf::SCFDialect>();
  context.getOrLoadDialect<arith::ArithDialect>();
  return TraceImporter(trace, context, options).run();
}
