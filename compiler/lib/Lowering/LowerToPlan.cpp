//===- LowerToPlan.cpp - The monarch dialect to the executable plan -------===//
//
// See LowerToPlan.h and docs/plan.md ("Lowering from the dialect").
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Lowering/LowerToPlan.h"

#include "monarch/Dialect/Monarch/IR/MeshLayout.h"
#include "monarch/Dialect/Monarch/IR/MonarchAttrs.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"
#include "monarch/Dialect/Monarch/IR/MonarchTypes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/ToolOutputFile.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>

namespace monarch {
#define GEN_PASS_DEF_MONARCHEMITPLAN
#include "monarch/Compiler/Lowering/LoweringPasses.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;
using mesh::MeshView;

namespace {

/// Where a ref lives: the mesh and stream of the instruction that defined it
/// (its deletion runs there).
struct RefInfo {
  int64_t mesh = 0;
  int64_t stream = 0;
};

/// A borrow token: its id and the streams it goes between.
struct BorrowInfo {
  int64_t id = 0;
  int64_t mesh = 0;
  int64_t fromStream = 0;
  int64_t toStream = 0;
};

/// A recording made for a called function, specialised on the plan meshes of
/// its arguments.
struct FunctionRecording {
  int64_t id = 0;
  SmallVector<RefInfo> results;
};

using InstList = google::protobuf::RepeatedPtrField<plan::Instruction>;

class PlanLowering {
public:
  PlanLowering(ModuleOp module, std::map<int64_t, plan::TensorMeta> *refTypes)
      : module(module), symbols(module), refTypes(refTypes) {}

  FailureOr<plan::Program> run(StringRef entryName);

private:
  // --- meshes and streams ---------------------------------------------------
  FailureOr<MeshView> meshView(Value mesh, Operation *user);
  int64_t meshId(const MeshView &view);
  FailureOr<int64_t> meshIdOf(Value mesh, Operation *user);
  int64_t streamId(StringRef name);

  // --- refs -----------------------------------------------------------------
  int64_t newRef(Value value, int64_t mesh, int64_t stream);
  FailureOr<int64_t> refOf(Value value, Operation *user);
  FailureOr<int64_t> tensorMesh(Value value, Operation *user);

  // --- instructions ---------------------------------------------------------
  plan::Instruction &emit(Operation *op, int64_t mesh, int64_t stream);
  LogicalResult lowerBlock(Block &block);
  void emitDeletes(Operation *op, ArrayRef<int64_t> dead);
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerArgs(Operation *op, ArrayAttr args, ValueRange tensors,
                          google::protobuf::RepeatedPtrField<plan::Value> *out);
  LogicalResult lowerCallee(Operation *op, StringRef schema, ValueRange tensors,
                            ArrayAttr args, Value mesh, ValueRange results,
                            bool isAten);
  LogicalResult lowerReduce(Operation *op, Value input, ArrayAttr dims,
                            ReductionKind reduction, bool scatter, bool inplace,
                            Value out, Value result, DTensorType resultType);
  LogicalResult lowerSend(Operation *op, Value input, Value dest, Value result);
  LogicalResult lowerFetch(Operation *op, Value input, ArrayAttr dims,
                           ArrayRef<int64_t> coords);
  LogicalResult lowerFor(scf::ForOp op);
  LogicalResult lowerCall(func::CallOp op);
  LogicalResult emitRecording(Operation *op, int64_t id, Block &body,
                              ArrayRef<Value> formals,
                              ArrayRef<int64_t> formalRefs, ValueRange yielded,
                              SmallVectorImpl<RefInfo> &resultInfo,
                              ArrayRef<int64_t> extraFormals = {});
  LogicalResult lowerIndexTensor(IndexTensorOp op);
  FailureOr<std::tuple<Value, int64_t, int64_t>> inductionKey(IndexTensorOp op);
  FailureOr<plan::TensorMeta> metaOf(Operation *op, Type type);

  ModuleOp module;
  SymbolTable symbols;
  /// Where to record the local type of every ref made for an IR value, if
  /// anywhere (the trace export).
  std::map<int64_t, plan::TensorMeta> *refTypes;
  plan::Program program;
  /// The instruction list being written (the program or a recording body).
  InstList *out = nullptr;
  /// Recording definitions, in the order they must be defined (callees
  /// before their callers).
  std::vector<plan::Instruction> recordings;

  Value root;
  std::optional<MeshView> rootLayout;
  std::vector<std::pair<MeshView, int64_t>> meshes;
  DenseMap<Value, MeshView> meshValues;
  llvm::StringMap<int64_t> streams;

  DenseMap<Value, int64_t> refs;
  DenseMap<Value, int64_t> valueMeshes;
  std::map<int64_t, RefInfo> refInfo;
  DenseMap<Value, BorrowInfo> borrows;
  /// Refs that die after the op being lowered (see lowerBlock).
  llvm::SetVector<int64_t> *dyingHere = nullptr;
  /// The ref of each induction tensor (`monarch.index_tensor` of a loop's
  /// induction variable) by (induction variable, plan mesh, stream): a
  /// formal of the loop's recording, bound while its body is lowered.
  DenseMap<std::tuple<Value, int64_t, int64_t>, int64_t> inductionRefs;
  /// Whether the plan has a `loop` (schema version 2).
  bool usesLoop = false;
  /// Functions being lowered (recursion is refused) and those lowered.
  llvm::SmallPtrSet<Operation *, 8> inProgress;
  llvm::StringMap<FunctionRecording> functionRecordings;

  int64_t nextRef = 1, nextInstruction = 0, nextRecording = 1, nextBorrow = 1;
};

std::string locationString(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string s = locationString(inner); !s.empty())
        return s;
  if (auto named = dyn_cast<NameLoc>(loc))
    return locationString(named.getChildLoc());
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return locationString(callSite.getCallee());
  return "";
}

InFlightDiagnostic unsupported(Operation *op, const Twine &why = "") {
  InFlightDiagnostic diag = op->emitError() << "cannot lower '" << op->getName()
                                            << "' to the plan";
  if (!why.isTriviallyEmpty())
    diag << ": " << why;
  return diag;
}

/// "cannot lower 'op' to the plan: " followed by the reason.
InFlightDiagnostic cannotLower(Operation *op) {
  return op->emitError() << "cannot lower '" << op->getName()
                         << "' to the plan: ";
}

bool isRefType(Type type) { return isa<DTensorType, AsyncType>(type); }

std::optional<plan::DType> planDType(Type element) {
  if (element.isF32())
    return plan::FLOAT32;
  if (element.isF16())
    return plan::FLOAT16;
  if (element.isBF16())
    return plan::BFLOAT16;
  if (element.isF64())
    return plan::FLOAT64;
  if (auto i = dyn_cast<IntegerType>(element)) {
    if (i.getWidth() == 1)
      return plan::BOOL;
    if (i.isUnsigned())
      return i.getWidth() == 8 ? std::optional(plan::UINT8) : std::nullopt;
    switch (i.getWidth()) {
    case 8:
      return plan::INT8;
    case 16:
      return plan::INT16;
    case 32:
      return plan::INT32;
    case 64:
      return plan::INT64;
    default:
      return std::nullopt;
    }
  }
  if (auto c = dyn_cast<ComplexType>(element)) {
    if (c.getElementType().isF32())
      return plan::COMPLEX64;
    if (c.getElementType().isF64())
      return plan::COMPLEX128;
  }
  return std::nullopt;
}

std::optional<plan::DType> planDType(DType dtype) {
  switch (dtype) {
  case DType::uint8:
    return plan::UINT8;
  case DType::int8:
    return plan::INT8;
  case DType::int16:
    return plan::INT16;
  case DType::int32:
    return plan::INT32;
  case DType::int64:
    return plan::INT64;
  case DType::float16:
    return plan::FLOAT16;
  case DType::float32:
    return plan::FLOAT32;
  case DType::float64:
    return plan::FLOAT64;
  case DType::complex64:
    return plan::COMPLEX64;
  case DType::complex128:
    return plan::COMPLEX128;
  case DType::Bool:
    return plan::BOOL;
  case DType::bfloat16:
    return plan::BFLOAT16;
  case DType::complex32:
    return std::nullopt;
  }
  return std::nullopt;
}

plan::ReduceOp planReduceOp(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::sum:
    return plan::SUM;
  case ReductionKind::avg:
    return plan::AVG;
  case ReductionKind::min:
    return plan::MIN;
  case ReductionKind::max:
    return plan::MAX;
  case ReductionKind::product:
    return plan::PRODUCT;
  case ReductionKind::stack:
    return plan::STACK;
  }
  return plan::SUM;
}

/// The value whose ref `v` shares when `v` is the result of an op that
/// returns its input (slice_mesh, in-place reduce, wait); null otherwise.
Value aliasParent(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return {};
  if (auto op = dyn_cast<SliceMeshOp>(def))
    return op.getInput();
  if (auto op = dyn_cast<ReduceOp>(def); op && op.getInplace())
    return op.getInput();
  if (auto op = dyn_cast<ReduceStartOp>(def); op && op.getInplace())
    return op.getInput();
  if (auto op = dyn_cast<WaitOp>(def))
    return op.getToken();
  return {};
}

//===----------------------------------------------------------------------===//
// Meshes, streams, refs
//===----------------------------------------------------------------------===//

FailureOr<MeshView> PlanLowering::meshView(Value mesh, Operation *user) {
  if (auto it = meshValues.find(mesh); it != meshValues.end())
    return it->second;
  auto type = cast<MeshType>(mesh.getType());
  Operation *def = mesh.getDefiningOp();
  if (!def) {
    cannotLower(user) << "its mesh is a block argument that is not bound to "
                         "a static view of the root mesh";
    return failure();
  }
  if (isa<SpawnProcsOp>(def)) {
    if (root && root != mesh) {
      InFlightDiagnostic diag =
          def->emitError("cannot lower a second 'monarch.spawn_procs' to the "
                         "plan: a plan has one root mesh");
      diag.attachNote(root.getLoc()) << "the root mesh";
      return failure();
    }
    auto view = MeshView::root(type.getShape());
    if (!view.ok()) {
      def->emitError("invalid root mesh: ") << view.error().message;
      return failure();
    }
    root = mesh;
    rootLayout = view.value();
    meshValues.try_emplace(mesh, view.value());
    return view.value();
  }
  if (!isMeshViewOp(def)) {
    cannotLower(def) << "its mesh result is not a static view of the root";
    return failure();
  }
  FailureOr<MeshView> source = meshView(def->getOperand(0), def);
  if (failed(source))
    return failure();
  if (auto view = dyn_cast<ViewOp>(def)) {
    // A view restarts from the root: its source must be the root itself.
    if (!rootLayout || *source != *rootLayout) {
      cannotLower(def)
          << "the source of a 'monarch.view' must be the root mesh";
      return failure();
    }
  }
  mesh::Result<MeshView> next =
      llvm::TypeSwitch<Operation *, mesh::Result<MeshView>>(def)
          .Case<RenameOp, SplitOp, SliceOp, FlattenOp, ViewOp>(
              [&](auto viewOp) { return viewOp.apply(*source); });
  if (!next.ok()) {
    def->emitError("invalid mesh view: ") << next.error().message;
    return failure();
  }
  meshValues.try_emplace(mesh, next.value());
  return next.value();
}

int64_t PlanLowering::meshId(const MeshView &view) {
  if (rootLayout && view == *rootLayout)
    return 0;
  for (auto &[known, id] : meshes)
    if (known == view)
      return id;
  int64_t id = static_cast<int64_t>(meshes.size()) + 1;
  meshes.emplace_back(view, id);
  plan::Mesh *m = program.add_meshes();
  m->set_id(id);
  m->set_offset(view.offset());
  for (const mesh::Dim &d : view.dims()) {
    plan::MeshDim *dim = m->add_dims();
    dim->set_name(d.name);
    dim->set_size(d.size);
    dim->set_stride(d.stride);
  }
  return id;
}

FailureOr<int64_t> PlanLowering::meshIdOf(Value mesh, Operation *user) {
  FailureOr<MeshView> view = meshView(mesh, user);
  if (failed(view))
    return failure();
  return meshId(*view);
}

int64_t PlanLowering::streamId(StringRef name) {
  if (name.empty())
    return 0;
  auto [it, inserted] =
      streams.try_emplace(name, static_cast<int64_t>(streams.size()) + 1);
  if (inserted) {
    plan::Stream *s = program.add_streams();
    s->set_id(it->second);
    s->set_name(name.str());
  }
  return it->second;
}

int64_t PlanLowering::newRef(Value value, int64_t mesh, int64_t stream) {
  int64_t ref = nextRef++;
  refInfo[ref] = {mesh, stream};
  if (value) {
    refs[value] = ref;
    valueMeshes[value] = mesh;
    if (refTypes) {
      Type type = value.getType();
      if (auto async = dyn_cast<AsyncType>(type))
        type = async.getValueType();
      if (auto tensor = dyn_cast<DTensorType>(type);
          tensor && tensor.getLocal().hasStaticShape())
        if (std::optional<plan::DType> dtype =
                planDType(tensor.getLocal().getElementType())) {
          plan::TensorMeta &meta = (*refTypes)[ref];
          meta.set_dtype(*dtype);
          for (int64_t d : tensor.getShape())
            meta.add_shape(d);
        }
    }
  }
  return ref;
}

FailureOr<int64_t> PlanLowering::refOf(Value value, Operation *user) {
  if (auto it = refs.find(value); it != refs.end())
    return it->second;
  cannotLower(user) << "an operand (" << value.getType()
                    << ") has no plan ref (defined by an unsupported op?)";
  return failure();
}

FailureOr<int64_t> PlanLowering::tensorMesh(Value value, Operation *user) {
  if (auto it = valueMeshes.find(value); it != valueMeshes.end())
    return it->second;
  cannotLower(user) << "the mesh of an operand is unknown";
  return failure();
}

FailureOr<plan::TensorMeta> PlanLowering::metaOf(Operation *op, Type type) {
  if (auto async = dyn_cast<AsyncType>(type))
    type = async.getValueType();
  auto tensor = dyn_cast<DTensorType>(type);
  if (!tensor) {
    cannotLower(op) << "expected a distributed tensor, got " << type;
    return failure();
  }
  std::optional<plan::DType> dtype =
      planDType(tensor.getLocal().getElementType());
  if (!dtype) {
    cannotLower(op) << "element type " << tensor.getLocal().getElementType()
                    << " has no plan dtype";
    return failure();
  }
  plan::TensorMeta meta;
  meta.set_dtype(*dtype);
  for (int64_t d : tensor.getShape()) {
    if (ShapedType::isDynamic(d)) {
      cannotLower(op) << "the tensor " << type
                      << " has a dynamic shape, which the plan needs static";
      return failure();
    }
    meta.add_shape(d);
  }
  return meta;
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

plan::Instruction &PlanLowering::emit(Operation *op, int64_t mesh,
                                      int64_t stream) {
  plan::Instruction *inst = out->Add();
  inst->set_id(nextInstruction++);
  inst->set_mesh(mesh);
  inst->set_stream(stream);
  if (op)
    inst->set_location(locationString(op->getLoc()));
  return *inst;
}

/// Lowers the ops of `block` (not its terminator) and deletes every ref
/// defined in it right after its last use. Refs used by the terminator
/// (returned or yielded) and borrowed refs are not deleted here.
LogicalResult PlanLowering::lowerBlock(Block &block) {
  // Position of every op of the block.
  DenseMap<Operation *, unsigned> position;
  unsigned n = 0;
  for (Operation &op : block)
    position[&op] = n++;

  // For each position, the values whose ref dies after it.
  DenseMap<unsigned, SmallVector<Value>> dying;
  for (Operation &op : block.without_terminator()) {
    for (Value result : op.getResults()) {
      if (!isRefType(result.getType()) || aliasParent(result))
        continue;
      if (isa<BorrowOp>(op))
        continue; // ended by borrow_drop
      if (auto index = dyn_cast<IndexTensorOp>(op);
          index && !getConstantIntValue(index.getIndex()))
        continue; // names an induction formal, which the loop owns
      // Every use of the ref: through aliases, and a borrow of it lasts
      // until the borrow's events.
      unsigned last = position[&op];
      bool escapes = false;
      SmallVector<Value> work{result};
      while (!work.empty() && !escapes) {
        Value v = work.pop_back_val();
        for (OpOperand &use : v.getUses()) {
          Operation *user = block.findAncestorOpInBlock(*use.getOwner());
          if (!user) {
            escapes = true;
            break;
          }
          if (user == block.getTerminator()) {
            escapes = true;
            break;
          }
          last = std::max(last, position[user]);
          Operation *owner = use.getOwner();
          if (owner->getNumResults() == 1 &&
              aliasParent(owner->getResult(0)) == v)
            work.push_back(owner->getResult(0));
          if (auto borrow = dyn_cast<BorrowOp>(owner)) {
            for (Operation *event : borrow.getBorrow().getUsers())
              if (Operation *e = block.findAncestorOpInBlock(*event))
                last = std::max(last, position[e]);
            for (OpOperand &bu : borrow.getResult().getUses())
              if (Operation *e = block.findAncestorOpInBlock(*bu.getOwner()))
                last = std::max(last, position[e]);
          }
        }
      }
      if (!escapes)
        dying[last].push_back(result);
    }
  }

  for (Operation &op : block.without_terminator()) {
    // Refs of values defined earlier die after this op; lowerFor may free
    // them sooner (after the first iteration) and take them out.
    llvm::SetVector<int64_t> dyingRefs;
    if (auto it = dying.find(position[&op]); it != dying.end())
      for (Value v : it->second)
        if (v.getDefiningOp() != &op)
          if (auto ref = refs.find(v); ref != refs.end())
            dyingRefs.insert(ref->second);
    llvm::SetVector<int64_t> *outerDying = dyingHere;
    dyingHere = &dyingRefs;
    LogicalResult lowered = lowerOp(&op);
    dyingHere = outerDying;
    if (failed(lowered))
      return failure();
    // Results of this op that are never used die here too.
    if (auto it = dying.find(position[&op]); it != dying.end())
      for (Value v : it->second)
        if (v.getDefiningOp() == &op)
          if (auto ref = refs.find(v); ref != refs.end())
            dyingRefs.insert(ref->second);
    emitDeletes(&op, dyingRefs.getArrayRef());
  }
  return success();
}

void PlanLowering::emitDeletes(Operation *op, ArrayRef<int64_t> dead) {
  // One delete_refs per (mesh, stream), in order of first appearance.
  llvm::MapVector<std::pair<int64_t, int64_t>, SmallVector<int64_t>> groups;
  for (int64_t r : dead)
    groups[{refInfo[r].mesh, refInfo[r].stream}].push_back(r);
  for (auto &[where, refList] : groups) {
    plan::Instruction &inst = emit(op, where.first, where.second);
    for (int64_t r : refList)
      inst.mutable_delete_refs()->add_refs(r);
  }
}

LogicalResult PlanLowering::lowerArgs(
    Operation *op, ArrayAttr args, ValueRange tensors,
    google::protobuf::RepeatedPtrField<plan::Value> *outArgs) {
  size_t next = 0;
  auto takeRef = [&]() -> FailureOr<int64_t> {
    if (next >= tensors.size()) {
      cannotLower(op) << "more tensor placeholders than operands";
      return failure();
    }
    return refOf(tensors[next++], op);
  };
  for (auto [index, attr] : llvm::enumerate(args)) {
    int64_t i = static_cast<int64_t>(index);
    plan::Value *v = outArgs->Add();
    if (isa<OperandAttr>(attr)) {
      FailureOr<int64_t> ref = takeRef();
      if (failed(ref))
        return failure();
      v->set_ref(*ref);
    } else if (auto list = dyn_cast<OperandListAttr>(attr)) {
      plan::RefList *refList = v->mutable_ref_list();
      for (int64_t k = 0; k < list.getCount(); ++k) {
        FailureOr<int64_t> ref = takeRef();
        if (failed(ref))
          return failure();
        refList->add_refs(*ref);
      }
    } else if (auto list = dyn_cast<OptionalOperandListAttr>(attr)) {
      plan::ValueList *values = v->mutable_list();
      for (bool present : list.getPresent().asArrayRef()) {
        plan::Value *element = values->add_values();
        if (!present) {
          element->mutable_none();
          continue;
        }
        FailureOr<int64_t> ref = takeRef();
        if (failed(ref))
          return failure();
        element->set_ref(*ref);
      }
    } else if (auto b = dyn_cast<BoolAttr>(attr)) {
      v->set_bool_value(b.getValue());
    } else if (auto integer = dyn_cast<IntegerAttr>(attr)) {
      if (integer.getType().isInteger(1))
        v->set_bool_value(integer.getValue().getBoolValue());
      else
        v->set_int_value(integer.getValue().getSExtValue());
    } else if (auto f = dyn_cast<FloatAttr>(attr)) {
      v->set_float_value(f.getValueAsDouble());
    } else if (auto s = dyn_cast<StringAttr>(attr)) {
      v->set_string_value(s.getValue().str());
    } else if (auto a = dyn_cast<DenseI64ArrayAttr>(attr)) {
      // The list is set even when empty (`zeros(())` has size []).
      plan::IntList *list = v->mutable_int_list();
      for (int64_t x : a.asArrayRef())
        list->add_values(x);
    } else if (auto a = dyn_cast<DenseF64ArrayAttr>(attr)) {
      plan::FloatList *list = v->mutable_float_list();
      for (double x : a.asArrayRef())
        list->add_values(x);
    } else if (auto a = dyn_cast<DenseBoolArrayAttr>(attr)) {
      plan::BoolList *list = v->mutable_bool_list();
      for (bool x : a.asArrayRef())
        list->add_values(x);
    } else if (auto d = dyn_cast<DTypeAttr>(attr)) {
      std::optional<plan::DType> dtype = planDType(d.getValue());
      if (!dtype) {
        cannotLower(op) << "argument #" << i << ": dtype "
                        << stringifyDType(d.getValue()) << " has no plan dtype";
        return failure();
      }
      v->set_dtype(*dtype);
    } else if (auto d = dyn_cast<DeviceAttr>(attr)) {
      v->mutable_device()->set_spec(d.getName().getValue().str());
    } else if (auto l = dyn_cast<TorchLayoutAttr>(attr)) {
      switch (l.getValue()) {
      case TorchLayout::strided:
        v->set_layout(plan::STRIDED);
        break;
      case TorchLayout::sparse_coo:
        v->set_layout(plan::SPARSE_COO);
        break;
      default:
        cannotLower(op) << "argument #" << i << ": layout "
                        << stringifyTorchLayout(l.getValue())
                        << " has no plan layout";
        return failure();
      }
    } else if (auto m = dyn_cast<MemoryFormatAttr>(attr)) {
      switch (m.getValue()) {
      case MemoryFormat::contiguous_format:
        v->set_memory_format(plan::CONTIGUOUS_FORMAT);
        break;
      case MemoryFormat::preserve_format:
        v->set_memory_format(plan::PRESERVE_FORMAT);
        break;
      case MemoryFormat::channels_last:
        v->set_memory_format(plan::CHANNELS_LAST);
        break;
      case MemoryFormat::channels_last_3d:
        v->set_memory_format(plan::CHANNELS_LAST_3D);
        break;
      }
    } else if (isa<NoneAttr>(attr)) {
      v->mutable_none();
    } else if (auto s = dyn_cast<ScalarAttr>(attr)) {
      Attribute inner = s.getValue();
      plan::Scalar *scalar = v->mutable_scalar();
      if (auto b = dyn_cast<BoolAttr>(inner))
        scalar->set_bool_value(b.getValue());
      else if (auto i = dyn_cast<IntegerAttr>(inner))
        scalar->set_int_value(i.getValue().getSExtValue());
      else if (auto f = dyn_cast<FloatAttr>(inner))
        scalar->set_float_value(f.getValueAsDouble());
      else {
        cannotLower(op) << "argument #" << i << ": scalar " << inner
                        << " is not an int, float or bool";
        return failure();
      }
    } else {
      cannotLower(op) << "argument #" << i << " (" << attr
                      << ") has no plan value";
      return failure();
    }
  }
  if (next != tensors.size()) {
    cannotLower(op) << "the argument list does not place every tensor operand";
    return failure();
  }
  return success();
}

LogicalResult PlanLowering::lowerCallee(Operation *op, StringRef schema,
                                        ValueRange tensors, ArrayAttr args,
                                        Value mesh, ValueRange results,
                                        bool isAten) {
  FailureOr<int64_t> meshIdValue = meshIdOf(mesh, op);
  if (failed(meshIdValue))
    return failure();
  StringRef stream;
  if (!results.empty())
    stream = cast<DTensorType>(results.front().getType()).getStreamName();
  else if (!tensors.empty())
    stream = cast<DTensorType>(tensors.front().getType()).getStreamName();
  int64_t streamIdValue = streamId(stream);
  plan::Instruction &inst = emit(op, *meshIdValue, streamIdValue);
  google::protobuf::RepeatedPtrField<plan::Value> *argList;
  google::protobuf::RepeatedField<int64_t> *resultList;
  if (isAten) {
    plan::CallOp *call = inst.mutable_call_op();
    // "aten::add.Tensor" -> name "aten::add", overload "Tensor".
    size_t ns = schema.find("::");
    size_t dot = schema.find('.', ns == StringRef::npos ? 0 : ns + 2);
    call->set_name(schema.substr(0, dot).str());
    if (dot != StringRef::npos)
      call->set_overload(schema.substr(dot + 1).str());
    argList = call->mutable_args();
    resultList = call->mutable_results();
  } else {
    plan::CallFunction *call = inst.mutable_call_function();
    call->set_name(schema.str());
    // A function the workers cannot import travels by value (its pickle),
    // kept on the op by the trace import.
    if (auto definition = op->getAttrOfType<StringAttr>("monarch.definition"))
      call->set_definition(definition.getValue().str());
    argList = call->mutable_args();
    resultList = call->mutable_results();
  }
  if (failed(lowerArgs(op, args, tensors, argList)))
    return failure();
  for (Value result : results)
    resultList->Add(newRef(result, *meshIdValue, streamIdValue));
  return success();
}

LogicalResult PlanLowering::lowerReduce(Operation *op, Value input,
                                        ArrayAttr dims, ReductionKind reduction,
                                        bool scatter, bool inplace, Value outV,
                                        Value result, DTensorType resultType) {
  FailureOr<int64_t> inputRef = refOf(input, op);
  FailureOr<int64_t> mesh = tensorMesh(input, op);
  FailureOr<plan::TensorMeta> meta = metaOf(op, input.getType());
  if (failed(inputRef) || failed(mesh) || failed(meta))
    return failure();
  int64_t stream = streamId(resultType.getStreamName());
  plan::Instruction &inst = emit(op, *mesh, stream);
  plan::Reduce *reduce = inst.mutable_reduce();
  reduce->set_input(*inputRef);
  for (StringRef d : dims.getAsValueRange<StringAttr>())
    reduce->add_dims(d.str());
  reduce->set_op(planReduceOp(reduction));
  reduce->set_scatter(scatter);
  reduce->set_in_place(inplace);
  *reduce->mutable_input_meta() = *meta;
  if (outV) {
    FailureOr<int64_t> outRef = refOf(outV, op);
    if (failed(outRef))
      return failure();
    reduce->set_out(*outRef);
  }
  if (inplace) {
    refs[result] = *inputRef;
    valueMeshes[result] = *mesh;
  } else {
    reduce->set_result(newRef(result, *mesh, stream));
  }
  return success();
}

LogicalResult PlanLowering::lowerSend(Operation *op, Value input, Value dest,
                                      Value result) {
  FailureOr<int64_t> inputRef = refOf(input, op);
  FailureOr<int64_t> source = tensorMesh(input, op);
  FailureOr<int64_t> destId = meshIdOf(dest, op);
  FailureOr<plan::TensorMeta> meta = metaOf(op, result.getType());
  if (failed(inputRef) || failed(source) || failed(destId) || failed(meta))
    return failure();
  int64_t stream = streamId(cast<DTensorType>(input.getType()).getStreamName());
  plan::Instruction &inst = emit(op, *destId, stream);
  plan::SendTensor *send = inst.mutable_send_tensor();
  send->set_input(*inputRef);
  send->set_source_mesh(*source);
  send->set_dest_mesh(*destId);
  *send->mutable_meta() = *meta;
  send->set_result(newRef(result, *destId, stream));
  return success();
}

LogicalResult PlanLowering::lowerFetch(Operation *op, Value input,
                                       ArrayAttr dims,
                                       ArrayRef<int64_t> coords) {
  FailureOr<int64_t> ref = refOf(input, op);
  FailureOr<int64_t> mesh = tensorMesh(input, op);
  if (failed(ref) || failed(mesh))
    return failure();
  // The 0-d slice of the tensor's mesh at the coordinates (0 if not given).
  MeshView view = *mesh == 0 ? *rootLayout : meshes[*mesh - 1].first;
  for (std::string name : view.names()) {
    int64_t coord = 0;
    for (auto [d, c] : llvm::zip(dims.getAsValueRange<StringAttr>(), coords))
      if (d == name)
        coord = c;
    auto next = view.slice(name, coord);
    if (!next.ok()) {
      op->emitError("cannot lower to the plan: ") << next.error().message;
      return failure();
    }
    view = next.value();
  }
  int64_t stream = streamId(cast<DTensorType>(input.getType()).getStreamName());
  plan::Instruction &inst = emit(op, meshId(view), stream);
  inst.mutable_fetch()->set_ref(*ref);
  return success();
}

LogicalResult PlanLowering::emitRecording(Operation *op, int64_t id,
                                          Block &body, ArrayRef<Value> formals,
                                          ArrayRef<int64_t> formalRefs,
                                          ValueRange yielded,
                                          SmallVectorImpl<RefInfo> &resultInfo,
                                          ArrayRef<int64_t> extraFormals) {
  plan::Instruction define;
  define.set_id(nextInstruction++);
  define.set_location(locationString(op->getLoc()));
  plan::Recording *rec = define.mutable_define_recording()->mutable_recording();
  rec->set_id(id);
  // monarch-mark-cuda-graphs marks the loop or the called function.
  if (Operation *owner = body.getParentOp())
    rec->set_cuda_graph(owner->hasAttr("monarch.cuda_graph"));
  // Bind the formals, remembering what they shadow (captured outer values).
  SmallVector<std::pair<Value, std::optional<int64_t>>> saved;
  for (auto [value, ref] : llvm::zip(formals, formalRefs)) {
    auto it = refs.find(value);
    saved.emplace_back(value, it == refs.end() ? std::nullopt
                                               : std::optional(it->second));
    refs[value] = ref;
    rec->add_formals(ref);
  }
  // Formals no IR value stands for (a loop's induction tensors), bound by
  // the caller.
  for (int64_t ref : extraFormals)
    rec->add_formals(ref);
  InstList *outer = out;
  out = rec->mutable_body();
  LogicalResult result = lowerBlock(body);
  if (succeeded(result)) {
    Operation *terminator = body.getTerminator();
    llvm::SmallDenseSet<int64_t> taken(formalRefs.begin(), formalRefs.end());
    for (Value v : yielded) {
      FailureOr<int64_t> ref = refOf(v, terminator);
      if (failed(ref)) {
        result = failure();
        break;
      }
      // Each result is a distinct ref defined by the body: a formal or a
      // value yielded twice is returned through an alias (same storage).
      if (!taken.insert(*ref).second ||
          llvm::is_contained(extraFormals, *ref)) {
        RefInfo info = refInfo[*ref];
        plan::Instruction &inst = emit(terminator, info.mesh, info.stream);
        plan::CallOp *call = inst.mutable_call_op();
        call->set_name("aten::alias");
        call->add_args()->set_ref(*ref);
        int64_t alias = newRef({}, info.mesh, info.stream);
        call->add_results(alias);
        ref = alias;
      }
      rec->add_results(*ref);
      resultInfo.push_back(refInfo[*ref]);
    }
  }
  out = outer;
  for (auto &[value, ref] : saved) {
    if (ref)
      refs[value] = *ref;
    else
      refs.erase(value);
  }
  if (succeeded(result))
    recordings.push_back(std::move(define));
  return result;
}

/// The tensors a region uses from above, in a stable order.
SmallVector<Value> capturedRefs(Region &region) {
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(region, above);
  SmallVector<Value> result;
  for (Value v : above)
    if (isRefType(v.getType()))
      result.push_back(v);
  return result;
}

FailureOr<std::tuple<Value, int64_t, int64_t>>
PlanLowering::inductionKey(IndexTensorOp op) {
  FailureOr<int64_t> mesh = meshIdOf(op.getMesh(), op);
  if (failed(mesh))
    return failure();
  int64_t stream = streamId(op.getType().getStreamName());
  return std::make_tuple(Value(op.getIndex()), *mesh, stream);
}

LogicalResult PlanLowering::lowerIndexTensor(IndexTensorOp op) {
  FailureOr<std::tuple<Value, int64_t, int64_t>> key = inductionKey(op);
  if (failed(key))
    return failure();
  auto [index, mesh, stream] = *key;
  // A constant index is a tensor like any other.
  if (std::optional<int64_t> c = getConstantIntValue(index)) {
    plan::Instruction &inst = emit(op, mesh, stream);
    plan::CallOp *call = inst.mutable_call_op();
    call->set_name("aten::scalar_tensor");
    call->add_args()->mutable_scalar()->set_int_value(*c);
    plan::NamedValue *dtype = call->add_kwargs();
    dtype->set_name("dtype");
    dtype->mutable_value()->set_dtype(plan::INT64);
    call->add_results(newRef(op.getResult(), mesh, stream));
    return success();
  }
  // The induction variable of a loop being lowered: the loop's induction
  // formal for this mesh and stream (lowerFor made and bound it).
  auto it = inductionRefs.find(*key);
  if (it == inductionRefs.end())
    return cannotLower(op) << "its index is neither a constant nor the "
                              "induction variable of an enclosing scf.for";
  refs[op.getResult()] = it->second;
  valueMeshes[op.getResult()] = mesh;
  return success();
}

LogicalResult PlanLowering::lowerFor(scf::ForOp op) {
  std::optional<int64_t> lb = getConstantIntValue(op.getLowerBound());
  std::optional<int64_t> ub = getConstantIntValue(op.getUpperBound());
  std::optional<int64_t> step = getConstantIntValue(op.getStep());
  if (!lb || !ub || !step)
    return unsupported(op, "its bounds and step must be constants");
  if (*step <= 0)
    return unsupported(op, "its step must be positive");
  // The plan has no scalars: the induction variable exists on the workers
  // only as the tensors monarch.index_tensor makes of it.
  for (Operation *user : op.getInductionVar().getUsers())
    if (!isa<IndexTensorOp>(user))
      return unsupported(op, "its induction variable is used by '" +
                                 user->getName().getStringRef() +
                                 "': only monarch.index_tensor may use it "
                                 "(the plan has no scalar values)");
  for (Value v : op.getInitArgs())
    if (!isa<DTensorType>(v.getType()))
      return unsupported(op, "a loop-carried value is not a distributed "
                             "tensor");
  int64_t trips = 0, span;
  if (*ub > *lb) {
    if (llvm::SubOverflow(*ub, *lb, span))
      return unsupported(op, "its trip count overflows int64");
    trips = (span - 1) / *step + 1;
  }
  if (trips > plan::Loop::MAX_TRIPS)
    return unsupported(op, "it runs " + Twine(trips) +
                               " times, more than a plan loop may (" +
                               Twine(int64_t{plan::Loop::MAX_TRIPS}) + ")");

  SmallVector<int64_t> carried;
  for (Value v : op.getInitArgs()) {
    FailureOr<int64_t> ref = refOf(v, op);
    if (failed(ref))
      return failure();
    carried.push_back(*ref);
  }
  if (trips == 0) {
    // scf.for's results are then its initial values: new refs (aliases), so
    // that each result's liveness is its own.
    for (auto [result, init] : llvm::zip(op.getResults(), carried)) {
      RefInfo info = refInfo[init];
      plan::Instruction &inst = emit(op, info.mesh, info.stream);
      plan::CallOp *call = inst.mutable_call_op();
      call->set_name("aten::alias");
      call->add_args()->set_ref(init);
      call->add_results(newRef(result, info.mesh, info.stream));
    }
    return success();
  }

  // The body's index_tensor ops: of this loop's induction variable (one
  // induction formal per mesh and stream), or of an enclosing loop's (that
  // loop's induction tensor, captured).
  SmallVector<std::tuple<Value, int64_t, int64_t>> own, outer;
  WalkResult walked = op.getRegion().walk([&](IndexTensorOp index) {
    Value iv = index.getIndex();
    bool mine = iv == op.getInductionVar();
    // Constants, and inner loops' induction variables (their loops' own).
    if (getConstantIntValue(iv) ||
        (!mine && op.getRegion().isAncestor(iv.getParentRegion())))
      return WalkResult::advance();
    FailureOr<std::tuple<Value, int64_t, int64_t>> key = inductionKey(index);
    if (failed(key))
      return WalkResult::interrupt();
    if (!mine && !inductionRefs.count(*key)) {
      (void)lowerIndexTensor(index); // says what is wrong
      return WalkResult::interrupt();
    }
    auto &list = mine ? own : outer;
    if (!llvm::is_contained(list, *key))
      list.push_back(*key);
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();

  // Formals: the iteration arguments, the tensors captured from above and the
  // enclosing loops' induction tensors, then this loop's induction tensors.
  SmallVector<Value> captured = capturedRefs(op.getRegion());
  SmallVector<Value> formals(op.getRegionIterArgs());
  formals.append(captured);
  SmallVector<int64_t> formalRefs, capturedActuals;
  for (auto [i, value] : llvm::enumerate(formals)) {
    Value outerValue =
        i < op.getNumRegionIterArgs() ? op.getInitArgs()[i] : value;
    FailureOr<int64_t> outerRef = refOf(outerValue, op);
    FailureOr<int64_t> mesh = tensorMesh(outerValue, op);
    if (failed(outerRef) || failed(mesh))
      return failure();
    if (i >= op.getNumRegionIterArgs())
      capturedActuals.push_back(*outerRef);
    formalRefs.push_back(
        newRef({}, refInfo[*outerRef].mesh, refInfo[*outerRef].stream));
    valueMeshes[value] = *mesh;
  }
  SmallVector<int64_t> inductionFormals;
  SmallVector<
      std::pair<std::tuple<Value, int64_t, int64_t>, std::optional<int64_t>>>
      shadowed;
  auto bindInduction = [&](const std::tuple<Value, int64_t, int64_t> &key) {
    int64_t ref = newRef({}, std::get<1>(key), std::get<2>(key));
    auto it = inductionRefs.find(key);
    shadowed.emplace_back(key, it == inductionRefs.end()
                                   ? std::nullopt
                                   : std::optional(it->second));
    inductionRefs[key] = ref;
    inductionFormals.push_back(ref);
  };
  for (const auto &key : outer) {
    capturedActuals.push_back(inductionRefs.at(key));
    bindInduction(key);
  }
  for (const auto &key : own)
    bindInduction(key);

  int64_t id = nextRecording++;
  SmallVector<RefInfo> resultInfo;
  auto yield = cast<scf::YieldOp>(op.getBody()->getTerminator());
  LogicalResult lowered =
      emitRecording(op, id, *op.getBody(), formals, formalRefs,
                    yield.getOperands(), resultInfo, inductionFormals);
  for (auto &[key, ref] : llvm::reverse(shadowed)) {
    if (ref)
      inductionRefs[key] = *ref;
    else
      inductionRefs.erase(key);
  }
  if (failed(lowered))
    return failure();

  // One instruction, whatever the number of trips (docs/plan.md, `loop`).
  usesLoop = true;
  plan::Instruction &inst = emit(op, 0, 0);
  plan::Loop *loop = inst.mutable_loop();
  loop->set_recording(id);
  loop->set_trips(trips);
  loop->set_lower(*lb);
  loop->set_step(*step);
  for (int64_t r : carried)
    loop->add_carried(r);
  for (int64_t r : capturedActuals)
    loop->add_captured(r);
  for (const auto &key : own) {
    plan::Induction *induction = loop->add_induction();
    induction->set_mesh(std::get<1>(key));
    induction->set_stream(std::get<2>(key));
  }
  for (auto [i, info] : llvm::enumerate(resultInfo))
    loop->add_results(newRef(op.getResult(i), info.mesh, info.stream));
  // An initial value whose last use is this loop is freed after the first
  // iteration, not held to the end (unless every iteration reads it too).
  for (int64_t r : carried)
    if (dyingHere && dyingHere->contains(r) &&
        !llvm::is_contained(capturedActuals, r) &&
        llvm::count(carried, r) == 1) {
      loop->add_consumed(r);
      dyingHere->remove(r);
    }
  // The results' meshes follow the yielded values'.
  for (auto [i, info] : llvm::enumerate(resultInfo))
    valueMeshes[op.getResult(i)] = info.mesh;
  return success();
}

LogicalResult PlanLowering::lowerCall(func::CallOp op) {
  auto callee = symbols.lookup<func::FuncOp>(op.getCallee());
  if (!callee || callee.isExternal())
    return unsupported(op, "the callee '" + op.getCallee() +
                               "' has no body in this module");
  if (inProgress.contains(callee))
    return unsupported(op, "recursive calls cannot be recorded");
  for (Type t : callee.getResultTypes())
    if (!isa<DTensorType, HostType>(t))
      return unsupported(op, "a result is neither a distributed tensor nor a "
                             "host value");
  if (callee.getBody().getBlocks().size() != 1)
    return unsupported(op, "the callee has several blocks");

  // Specialise on the plan meshes of the arguments.
  std::string key = op.getCallee().str();
  SmallVector<Value> formals;
  SmallVector<int64_t> formalRefs, actuals;
  Block &body = callee.getBody().front();
  for (auto [arg, actual] : llvm::zip(body.getArguments(), op.getOperands())) {
    if (isa<MeshType>(arg.getType())) {
      FailureOr<MeshView> view = meshView(actual, op);
      if (failed(view))
        return failure();
      key += "|m" + std::to_string(meshId(*view));
      meshValues.erase(arg);
      meshValues.try_emplace(arg, *view);
      continue;
    }
    if (!isa<DTensorType>(arg.getType()))
      return unsupported(op, "an argument is neither a mesh nor a distributed "
                             "tensor");
    FailureOr<int64_t> ref = refOf(actual, op);
    FailureOr<int64_t> mesh = tensorMesh(actual, op);
    if (failed(ref) || failed(mesh))
      return failure();
    key += "|t" + std::to_string(*mesh);
    valueMeshes[arg] = *mesh;
    formals.push_back(arg);
    actuals.push_back(*ref);
  }
  auto it = functionRecordings.find(key);
  if (it == functionRecordings.end()) {
    // Views made in the body depend on this specialisation's meshes.
    callee.getBody().walk([&](Operation *inner) {
      for (Value r : inner->getResults())
        meshValues.erase(r);
    });
    FunctionRecording fr;
    fr.id = nextRecording++;
    for (int64_t r : actuals)
      formalRefs.push_back(newRef({}, refInfo[r].mesh, refInfo[r].stream));
    SmallVector<Value> yielded;
    for (Value v : body.getTerminator()->getOperands())
      if (isa<DTensorType>(v.getType()))
        yielded.push_back(v);
    inProgress.insert(callee);
    LogicalResult lowered = emitRecording(op, fr.id, body, formals, formalRefs,
                                          yielded, fr.results);
    inProgress.erase(callee);
    if (failed(lowered))
      return failure();
    it = functionRecordings.try_emplace(key, std::move(fr)).first;
  }
  plan::Instruction &inst = emit(op, 0, 0);
  plan::CallRecording *call = inst.mutable_call_recording();
  call->set_recording(it->second.id);
  for (int64_t r : actuals)
    call->add_actuals(r);
  unsigned k = 0;
  for (Value result : op.getResults()) {
    if (!isa<DTensorType>(result.getType()))
      continue;
    RefInfo info = it->second.results[k++];
    call->add_results(newRef(result, info.mesh, info.stream));
  }
  return success();
}

LogicalResult PlanLowering::lowerOp(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<SpawnProcsOp, RenameOp, SplitOp, SliceOp, FlattenOp, ViewOp>(
          [&](Operation *) {
            // Meshes are static: resolved (and declared) where they are used.
            return success(succeeded(meshView(op->getResult(0), op)));
          })
      .Case<arith::ConstantOp>([&](arith::ConstantOp c) {
        // Scalars exist only on the controller (loop bounds).
        if (!c.getType().isIntOrIndex())
          return LogicalResult(unsupported(op, "only integer constants "
                                               "(loop bounds) are supported"));
        return success();
      })
      .Case<AtenOp>([&](AtenOp a) {
        return lowerCallee(op, a.getSchema(), a.getTensors(), a.getArgs(),
                           a.getMesh(), a.getResults(), /*isAten=*/true);
      })
      .Case<CallFunctionOp>([&](CallFunctionOp c) {
        return lowerCallee(op, c.getCallee(), c.getTensors(), c.getArgs(),
                           c.getMesh(), c.getResults(), /*isAten=*/false);
      })
      .Case<RankOp>([&](RankOp r) -> LogicalResult {
        FailureOr<int64_t> mesh = meshIdOf(r.getMesh(), op);
        if (failed(mesh))
          return failure();
        int64_t stream =
            streamId(cast<DTensorType>(r.getType()).getStreamName());
        plan::Instruction &inst = emit(op, *mesh, stream);
        for (StringRef d : r.getDims().getAsValueRange<StringAttr>())
          inst.mutable_rank_tensor()->add_dims(d.str());
        inst.mutable_rank_tensor()->set_result(
            newRef(r.getResult(), *mesh, stream));
        return success();
      })
      .Case<ReduceOp>([&](ReduceOp r) {
        return lowerReduce(op, r.getInput(), r.getDims(), r.getReduction(),
                           r.getScatter(), r.getInplace(), r.getOut(),
                           r.getResult(), cast<DTensorType>(r.getType()));
      })
      .Case<ReduceStartOp>([&](ReduceStartOp r) {
        return lowerReduce(
            op, r.getInput(), r.getDims(), r.getReduction(), r.getScatter(),
            r.getInplace(), r.getOut(), r.getToken(),
            cast<DTensorType>(cast<AsyncType>(r.getType()).getValueType()));
      })
      .Case<WaitOp>([&](WaitOp w) -> LogicalResult {
        // The plan is asynchronous per stream: the reduce's result ref is
        // the waited value.
        if (!isa<DTensorType>(w.getType()))
          return unsupported(op, "it waits for something other than a "
                                 "distributed tensor");
        FailureOr<int64_t> ref = refOf(w.getToken(), op);
        FailureOr<int64_t> mesh = tensorMesh(w.getToken(), op);
        if (failed(ref) || failed(mesh))
          return failure();
        refs[w.getResult()] = *ref;
        valueMeshes[w.getResult()] = *mesh;
        return success();
      })
      .Case<ToMeshOp>([&](ToMeshOp t) {
        return lowerSend(op, t.getInput(), t.getDest(), t.getResult());
      })
      .Case<ToMeshStartOp>([&](ToMeshStartOp t) {
        // The plan is asynchronous per stream: the copy's ref is the token's.
        return lowerSend(op, t.getInput(), t.getDest(), t.getToken());
      })
      .Case<SliceMeshOp>([&](SliceMeshOp s) -> LogicalResult {
        // No data moves: the result is the input's ref on the sliced mesh.
        FailureOr<int64_t> ref = refOf(s.getInput(), op);
        FailureOr<int64_t> mesh = tensorMesh(s.getInput(), op);
        if (failed(ref) || failed(mesh))
          return failure();
        MeshView view = *mesh == 0 ? *rootLayout : meshes[*mesh - 1].first;
        for (auto [name, start, stop, stepValue] :
             llvm::zip(s.getDims().getAsValueRange<StringAttr>(), s.getStarts(),
                       s.getStops(), s.getSteps())) {
          auto bound = [](int64_t x) -> std::optional<int64_t> {
            if (x == SliceOp::kNone)
              return std::nullopt;
            return x;
          };
          mesh::Result<MeshView> next =
              stepValue == 0
                  ? view.slice(name, start)
                  : view.slice(name, mesh::Range{bound(start), bound(stop),
                                                 stepValue});
          if (!next.ok()) {
            op->emitError("cannot lower to the plan: ") << next.error().message;
            return failure();
          }
          view = next.value();
        }
        refs[s.getResult()] = *ref;
        valueMeshes[s.getResult()] = meshId(view);
        return success();
      })
      .Case<FetchShardOp, InspectOp>([&](auto f) {
        return lowerFetch(op, f.getInput(), f.getDims(), f.getCoords());
      })
      .Case<StreamCreateOp>([&](StreamCreateOp s) {
        streamId(s.getType().getName().getValue());
        return success();
      })
      .Case<BorrowOp>([&](BorrowOp b) -> LogicalResult {
        FailureOr<int64_t> input = refOf(b.getInput(), op);
        FailureOr<int64_t> mesh = tensorMesh(b.getInput(), op);
        if (failed(input) || failed(mesh))
          return failure();
        BorrowInfo info;
        info.id = nextBorrow++;
        info.mesh = *mesh;
        info.fromStream =
            streamId(cast<DTensorType>(b.getInput().getType()).getStreamName());
        info.toStream = streamId(
            cast<DTensorType>(b.getResult().getType()).getStreamName());
        plan::Instruction &inst = emit(op, info.mesh, info.toStream);
        plan::BorrowCreate *create = inst.mutable_borrow_create();
        create->set_borrow(info.id);
        create->set_input(*input);
        create->set_from_stream(info.fromStream);
        create->set_mutable_(b.getIsMutable());
        create->set_result(newRef(b.getResult(), info.mesh, info.toStream));
        borrows[b.getBorrow()] = info;
        return success();
      })
      .Case<BorrowFirstUseOp, BorrowLastUseOp, BorrowDropOp>(
          [&](auto e) -> LogicalResult {
            auto it = borrows.find(e.getBorrow());
            if (it == borrows.end())
              return unsupported(op, "its borrow token is not from a "
                                     "'monarch.borrow' of this function");
            const BorrowInfo &info = it->second;
            bool drop = isa<BorrowDropOp>(op);
            plan::Instruction &inst =
                emit(op, info.mesh, drop ? info.fromStream : info.toStream);
            if (isa<BorrowFirstUseOp>(op))
              inst.mutable_borrow_first_use()->set_borrow(info.id);
            else if (isa<BorrowLastUseOp>(op))
              inst.mutable_borrow_last_use()->set_borrow(info.id);
            else
              inst.mutable_borrow_drop()->set_borrow(info.id);
            return success();
          })
      .Case<IndexTensorOp>([&](IndexTensorOp t) { return lowerIndexTensor(t); })
      .Case<scf::ForOp>([&](scf::ForOp f) { return lowerFor(f); })
      .Case<func::CallOp>([&](func::CallOp c) { return lowerCall(c); })
      .Default([&](Operation *) { return LogicalResult(unsupported(op)); });
}

FailureOr<plan::Program> PlanLowering::run(StringRef entryName) {
  func::FuncOp entry;
  if (!entryName.empty()) {
    entry = symbols.lookup<func::FuncOp>(entryName);
    if (!entry) {
      module.emitError("no function '") << entryName << "' to lower";
      return failure();
    }
  } else if (!(entry = symbols.lookup<func::FuncOp>("main"))) {
    auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    if (funcs.size() != 1) {
      module.emitError("no entry function: name one with entry= (there is no "
                       "'main' and ")
          << funcs.size() << " functions)";
      return failure();
    }
    entry = funcs.front();
  }
  if (entry.isExternal() || entry.getBody().getBlocks().size() != 1) {
    entry.emitError("the entry function must have a body of one block");
    return failure();
  }
  if (entry.getNumArguments()) {
    entry.emitError("the entry function cannot take arguments: the plan has "
                    "no inputs");
    return failure();
  }

  program.set_magic(0x4d4f4e50);
  InstList top;
  out = &top;
  if (failed(lowerBlock(entry.getBody().front())))
    return failure();
  if (!rootLayout) {
    entry.emitError("the program has no 'monarch.spawn_procs': a plan needs "
                    "a root mesh");
    return failure();
  }
  for (const mesh::Dim &d : rootLayout->dims()) {
    plan::MeshDim *dim = program.add_root();
    dim->set_name(d.name);
    dim->set_size(d.size);
  }
  // The lowest schema version with everything the plan uses, so runtimes
  // older than the loop instruction keep running plans without one.
  program.set_version(usesLoop ? 2 : 1);
  // Recordings first (callees before callers), then the program.
  for (plan::Instruction &define : recordings)
    *program.add_instructions() = std::move(define);
  for (plan::Instruction &inst : top)
    *program.add_instructions() = std::move(inst);
  // Number the instructions in the order they are written (recording bodies
  // after their definition), so ids, fetches included, follow program order.
  int64_t id = 0;
  std::function<void(InstList &)> number = [&](InstList &list) {
    for (plan::Instruction &inst : list) {
      inst.set_id(id++);
      if (inst.has_define_recording())
        number(*inst.mutable_define_recording()
                    ->mutable_recording()
                    ->mutable_body());
    }
  };
  number(*program.mutable_instructions());
  return std::move(program);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct EmitPlanPass : public monarch::impl::MonarchEmitPlanBase<EmitPlanPass> {
  using MonarchEmitPlanBase::MonarchEmitPlanBase;

  void runOnOperation() override {
    if (format != "binary" && format != "text") {
      getOperation().emitError("--monarch-emit-plan: unknown format '")
          << format << "' (expected 'binary' or 'text')";
      return signalPassFailure();
    }
    FailureOr<plan::Program> program = lowerToPlan(getOperation(), entry);
    if (failed(program))
      return signalPassFailure();
    std::string error;
    auto file = openOutputFile(output, &error);
    if (!file) {
      getOperation().emitError("--monarch-emit-plan: ") << error;
      return signalPassFailure();
    }
    if (format == "text") {
      printPlan(*program, file->os());
    } else {
      std::string bytes;
      if (!program->SerializeToString(&bytes)) {
        getOperation().emitError("--monarch-emit-plan: cannot serialize");
        return signalPassFailure();
      }
      file->os() << bytes;
    }
    file->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace

FailureOr<plan::Program> monarch::lowerToPlan(ModuleOp module,
                                              StringRef entry) {
  return PlanLowering(module, nullptr).run(entry);
}

FailureOr<plan::Program>
monarch::lowerToPlan(ModuleOp module, StringRef entry,
                     std::map<int64_t, plan::TensorMeta> &refTypes) {
  return PlanLowering(module, &refTypes).run(entry);
}
