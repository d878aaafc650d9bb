//===- MonarchOps.cpp - Ops of the monarch dialect -----------------------===//
//
// Custom assembly, verifiers, type inference and folding of the monarch ops.
// All mesh arithmetic goes through monarch::mesh::MeshView so the compiler
// and the runtime agree on every rule and message (DESIGN.md §6.1).
//
//===----------------------------------------------------------------------===//

#include "monarch/Dialect/Monarch/IR/MonarchOps.h"
#include "monarch/Dialect/Monarch/IR/MeshLayout.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace monarch;
using mesh::MeshView;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static std::string formatError(const mesh::MeshError &error) {
  return std::string(mesh::errorKindName(error.kind)) + ": " + error.message;
}

static std::vector<std::string> toStrings(ArrayAttr names) {
  std::vector<std::string> result;
  if (!names)
    return result;
  for (Attribute a : names)
    if (auto s = dyn_cast<StringAttr>(a))
      result.push_back(s.getValue().str());
  return result;
}

static MeshView rootView(MeshType type) {
  // A verified MeshType always makes a valid root.
  auto view = MeshView::root(type.getShape());
  if (view.ok())
    return std::move(view).value();
  return std::move(MeshView::root({})).value();
}

static MeshType meshTypeOf(MLIRContext *ctx, const MeshView &view) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  for (const mesh::Dim &d : view.dims()) {
    names.push_back(StringAttr::get(ctx, d.name));
    sizes.push_back(d.size);
  }
  return MeshType::get(ctx, names, sizes);
}

/// Prints a name as a bare identifier when it is one, else quoted.
static void printName(AsmPrinter &p, StringRef name) {
  p.printKeywordOrString(name);
}

static ParseResult parseName(AsmParser &p, std::string &name) {
  return p.parseKeywordOrString(&name);
}

static std::string streamDescription(StringRef stream) {
  if (stream.empty())
    return "the default stream";
  return "stream \"" + stream.str() + "\"";
}

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

// `(a -> b, c -> d)`
static ParseResult parseRenames(OpAsmParser &p, ArrayAttr &from,
                                ArrayAttr &to) {
  SmallVector<Attribute> f, t;
  Builder &b = p.getBuilder();
  if (p.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            std::string a, c;
            if (parseName(p, a) || p.parseArrow() || parseName(p, c))
              return failure();
            f.push_back(b.getStringAttr(a));
            t.push_back(b.getStringAttr(c));
            return success();
          }))
    return failure();
  from = b.getArrayAttr(f);
  to = b.getArrayAttr(t);
  return success();
}

static void printRenames(OpAsmPrinter &p, Operation *, ArrayAttr from,
                         ArrayAttr to) {
  p << "(";
  llvm::interleaveComma(llvm::zip(from, to), p, [&](auto pair) {
    printName(p, cast<StringAttr>(std::get<0>(pair)).getValue());
    p << " -> ";
    printName(p, cast<StringAttr>(std::get<1>(pair)).getValue());
  });
  p << ")";
}

// `(host -> [dp, pp], gpu -> [tp], pp = 4)`
static ParseResult parseSplit(OpAsmParser &p, ArrayAttr &from, ArrayAttr &to,
                              ArrayAttr &sizeNames,
                              DenseI64ArrayAttr &sizeValues) {
  SmallVector<Attribute> f, t, sn;
  SmallVector<int64_t> sv;
  Builder &b = p.getBuilder();
  if (p.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            std::string name;
            if (parseName(p, name))
              return failure();
            if (succeeded(p.parseOptionalArrow())) {
              SmallVector<Attribute> names;
              if (p.parseCommaSeparatedList(
                      OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
                        std::string n;
                        if (parseName(p, n))
                          return failure();
                        names.push_back(b.getStringAttr(n));
                        return success();
                      }))
                return failure();
              f.push_back(b.getStringAttr(name));
              t.push_back(b.getArrayAttr(names));
              return success();
            }
            int64_t size;
            if (p.parseEqual() || p.parseInteger(size))
              return failure();
            sn.push_back(b.getStringAttr(name));
            sv.push_back(size);
            return success();
          }))
    return failure();
  from = b.getArrayAttr(f);
  to = b.getArrayAttr(t);
  sizeNames = b.getArrayAttr(sn);
  sizeValues = b.getDenseI64ArrayAttr(sv);
  return success();
}

static void printSplit(OpAsmPrinter &p, Operation *, ArrayAttr from,
                       ArrayAttr to, ArrayAttr sizeNames,
                       DenseI64ArrayAttr sizeValues) {
  p << "(";
  bool first = true;
  auto comma = [&] {
    if (!first)
      p << ", ";
    first = false;
  };
  for (auto [f, t] : llvm::zip(from, to)) {
    comma();
    printName(p, cast<StringAttr>(f).getValue());
    p << " -> [";
    llvm::interleaveComma(cast<ArrayAttr>(t), p, [&](Attribute n) {
      printName(p, cast<StringAttr>(n).getValue());
    });
    p << "]";
  }
  for (auto [n, v] : llvm::zip(sizeNames, sizeValues.asArrayRef())) {
    comma();
    printName(p, cast<StringAttr>(n).getValue());
    p << " = " << v;
  }
  p << ")";
}

// `(host = 1, gpu = 0:2, x = ::2)`
static ParseResult parseSliceSpec(OpAsmParser &p, ArrayAttr &dims,
                                  DenseI64ArrayAttr &starts,
                                  DenseI64ArrayAttr &stops,
                                  DenseI64ArrayAttr &steps) {
  constexpr int64_t kNone = SliceOp::kNone;
  SmallVector<Attribute> d;
  SmallVector<int64_t> a, o, s;
  Builder &b = p.getBuilder();
  if (p.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            std::string name;
            if (parseName(p, name) || p.parseEqual())
              return failure();
            d.push_back(b.getStringAttr(name));
            int64_t start = kNone, stop = kNone, step = 1;
            OptionalParseResult first = p.parseOptionalInteger(start);
            if (first.has_value() && failed(*first))
              return failure();
            if (failed(p.parseOptionalColon())) {
              if (!first.has_value())
                return ParseResult(p.emitError(
                    p.getCurrentLocation(),
                    "expected an index or a range start:stop:step"));
              a.push_back(start);
              o.push_back(kNone);
              s.push_back(0);
              return success();
            }
            OptionalParseResult second = p.parseOptionalInteger(stop);
            if (second.has_value() && failed(*second))
              return failure();
            if (succeeded(p.parseOptionalColon())) {
              SMLoc loc = p.getCurrentLocation();
              if (p.parseInteger(step))
                return failure();
              if (step <= 0)
                return ParseResult(
                    p.emitError(loc, "slice step must be positive"));
            }
            a.push_back(start);
            o.push_back(stop);
            s.push_back(step);
            return success();
          }))
    return failure();
  dims = b.getArrayAttr(d);
  starts = b.getDenseI64ArrayAttr(a);
  stops = b.getDenseI64ArrayAttr(o);
  steps = b.getDenseI64ArrayAttr(s);
  return success();
}

static void printSliceSpec(OpAsmPrinter &p, Operation *, ArrayAttr dims,
                           DenseI64ArrayAttr starts, DenseI64ArrayAttr stops,
                           DenseI64ArrayAttr steps) {
  constexpr int64_t kNone = SliceOp::kNone;
  p << "(";
  for (size_t i = 0, e = dims.size(); i < e; ++i) {
    if (i)
      p << ", ";
    printName(p, cast<StringAttr>(dims[i]).getValue());
    p << " = ";
    int64_t start = starts[i], stop = stops[i], step = steps[i];
    if (step == 0) {
      p << start;
      continue;
    }
    if (start != kNone)
      p << start;
    p << ":";
    if (stop != kNone)
      p << stop;
    if (step != 1)
      p << ":" << step;
  }
  p << ")";
}

static ParseResult parseName(OpAsmParser &p, StringAttr &name) {
  std::string n;
  if (parseName(p, n))
    return failure();
  name = p.getBuilder().getStringAttr(n);
  return success();
}

static void printName(OpAsmPrinter &p, Operation *, StringAttr name) {
  printName(p, name.getValue());
}

// `(dp = 15:96, pp = 4:24)`
static ParseResult parseLayout(OpAsmParser &p, ArrayAttr &names,
                               DenseI64ArrayAttr &sizes,
                               DenseI64ArrayAttr &strides) {
  SmallVector<Attribute> n;
  SmallVector<int64_t> sz, st;
  Builder &b = p.getBuilder();
  if (p.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            std::string name;
            int64_t size, stride;
            if (parseName(p, name) || p.parseEqual() || p.parseInteger(size) ||
                p.parseColon() || p.parseInteger(stride))
              return failure();
            n.push_back(b.getStringAttr(name));
            sz.push_back(size);
            st.push_back(stride);
            return success();
          }))
    return failure();
  names = b.getArrayAttr(n);
  sizes = b.getDenseI64ArrayAttr(sz);
  strides = b.getDenseI64ArrayAttr(st);
  return success();
}

static void printLayout(OpAsmPrinter &p, Operation *, ArrayAttr names,
                        DenseI64ArrayAttr sizes, DenseI64ArrayAttr strides) {
  p << "(";
  for (size_t i = 0, e = names.size(); i < e; ++i) {
    if (i)
      p << ", ";
    printName(p, cast<StringAttr>(names[i]).getValue());
    p << " = " << sizes[i] << ":" << strides[i];
  }
  p << ")";
}

// `(a, b)`
static ParseResult parseNameList(OpAsmParser &p, ArrayAttr &names) {
  SmallVector<Attribute> n;
  if (p.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            std::string name;
            if (parseName(p, name))
              return failure();
            n.push_back(p.getBuilder().getStringAttr(name));
            return success();
          }))
    return failure();
  names = p.getBuilder().getArrayAttr(n);
  return success();
}

static void printNameList(OpAsmPrinter &p, Operation *, ArrayAttr names) {
  p << "(";
  llvm::interleaveComma(names, p, [&](Attribute n) {
    printName(p, cast<StringAttr>(n).getValue());
  });
  p << ")";
}

// Optional `(host = 1, gpu = 0)`.
static ParseResult parseCoords(OpAsmParser &p, ArrayAttr &dims,
                               DenseI64ArrayAttr &coords) {
  SmallVector<Attribute> d;
  SmallVector<int64_t> c;
  if (p.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            std::string name;
            int64_t coord;
            if (parseName(p, name) || p.parseEqual() || p.parseInteger(coord))
              return failure();
            d.push_back(p.getBuilder().getStringAttr(name));
            c.push_back(coord);
            return success();
          }))
    return failure();
  dims = p.getBuilder().getArrayAttr(d);
  coords = p.getBuilder().getDenseI64ArrayAttr(c);
  return success();
}

static void printCoords(OpAsmPrinter &p, Operation *, ArrayAttr dims,
                        DenseI64ArrayAttr coords) {
  p << "(";
  for (size_t i = 0, e = dims.size(); i < e; ++i) {
    if (i)
      p << ", ";
    printName(p, cast<StringAttr>(dims[i]).getValue());
    p << " = " << coords[i];
  }
  p << ")";
}

// `(%a, 2 : i64, [%b, %c], #monarch.none)`
static ParseResult
parseArgList(OpAsmParser &p,
             SmallVectorImpl<OpAsmParser::UnresolvedOperand> &operands,
             ArrayAttr &args) {
  MLIRContext *ctx = p.getContext();
  SmallVector<Attribute> list;
  if (p.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            OpAsmParser::UnresolvedOperand operand;
            OptionalParseResult res = p.parseOptionalOperand(operand);
            if (res.has_value()) {
              if (failed(*res))
                return failure();
              operands.push_back(operand);
              list.push_back(OperandAttr::get(ctx));
              return success();
            }
            if (succeeded(p.parseOptionalLSquare())) {
              // `Tensor[]`, or `Tensor?[]` when some entry is #monarch.none.
              SmallVector<bool> present;
              if (failed(p.parseOptionalRSquare())) {
                do {
                  OptionalParseResult r = p.parseOptionalOperand(operand);
                  if (r.has_value()) {
                    if (failed(*r))
                      return failure();
                    operands.push_back(operand);
                    present.push_back(true);
                    continue;
                  }
                  SMLoc loc = p.getCurrentLocation();
                  Attribute none;
                  if (p.parseAttribute(none))
                    return failure();
                  if (!isa<NoneAttr>(none))
                    return p.emitError(loc, "expected a tensor operand or "
                                            "#monarch.none in a tensor list");
                  present.push_back(false);
                } while (succeeded(p.parseOptionalComma()));
                if (p.parseRSquare())
                  return failure();
              }
              if (llvm::all_of(present, [](bool b) { return b; }))
                list.push_back(OperandListAttr::get(
                    ctx, static_cast<int64_t>(present.size())));
              else
                list.push_back(OptionalOperandListAttr::get(
                    ctx, DenseBoolArrayAttr::get(ctx, present)));
              return success();
            }
            Attribute attr;
            if (p.parseAttribute(attr))
              return failure();
            list.push_back(attr);
            return success();
          }))
    return failure();
  args = ArrayAttr::get(ctx, list);
  return success();
}

static void printArgList(OpAsmPrinter &p, OperandRange operands,
                         ArrayAttr args) {
  size_t next = 0;
  llvm::interleaveComma(args, p, [&](Attribute a) {
    if (isa<OperandAttr>(a) && next < operands.size()) {
      p << operands[next++];
      return;
    }
    if (auto l = dyn_cast<OperandListAttr>(a)) {
      int64_t n = l.getCount();
      if (n >= 0 && next + n <= operands.size()) {
        p << "[";
        p.printOperands(operands.slice(next, n));
        p << "]";
        next += n;
        return;
      }
    }
    if (auto l = dyn_cast<OptionalOperandListAttr>(a)) {
      ArrayRef<bool> present = l.getPresent().asArrayRef();
      size_t n = llvm::count(present, true);
      if (next + n <= operands.size()) {
        p << "[";
        llvm::interleaveComma(present, p, [&](bool isPresent) {
          if (isPresent)
            p << operands[next++];
          else
            p << NoneAttr::get(a.getContext());
        });
        p << "]";
        return;
      }
    }
    p.printAttribute(a);
  });
}

static MeshType deriveMesh(TypeRange tensors, TypeRange results) {
  for (Type t : llvm::concat<const Type>(results, tensors))
    if (auto d = dyn_cast<DTensorType>(t))
      return d.getMesh();
  return {};
}

/// `"name"(args) on %mesh attr-dict : (tensor types) -> result types`, then
/// ` in !monarch.mesh<...>` when the mesh's type is not that of the tensors
/// (no tensors at all, or a WRONG_MESH op being printed).
template <typename OpTy>
static ParseResult parseTensorCall(OpAsmParser &p, OperationState &state,
                                   StringRef nameAttr) {
  StringAttr name;
  SmallVector<OpAsmParser::UnresolvedOperand> tensors;
  ArrayAttr args;
  OpAsmParser::UnresolvedOperand mesh;
  FunctionType fnType;
  SMLoc tensorsLoc;
  if (p.parseAttribute(name))
    return failure();
  tensorsLoc = p.getCurrentLocation();
  if (parseArgList(p, tensors, args) || p.parseKeyword("on") ||
      p.parseOperand(mesh) || p.parseOptionalAttrDict(state.attributes) ||
      p.parseColon())
    return failure();
  SMLoc typeLoc = p.getCurrentLocation();
  if (p.parseType(fnType))
    return failure();
  Type meshType;
  if (succeeded(p.parseOptionalKeyword("in"))) {
    if (p.parseType(meshType))
      return failure();
  } else {
    meshType = deriveMesh(fnType.getInputs(), fnType.getResults());
    if (!meshType)
      return p.emitError(typeLoc,
                         "expected `in !monarch.mesh<...>`: the op has no "
                         "distributed tensor to take the mesh type from");
  }
  auto &props = state.getOrAddProperties<typename OpTy::Properties>();
  props.args = args;
  if constexpr (std::is_same_v<OpTy, AtenOp>)
    props.schema = name;
  else
    props.callee = name;
  state.addTypes(fnType.getResults());
  if (p.resolveOperands(tensors, fnType.getInputs(), tensorsLoc,
                        state.operands) ||
      p.resolveOperand(mesh, meshType, state.operands))
    return failure();
  return success();
}

template <typename OpTy>
static void printTensorCall(OpTy op, OpAsmPrinter &p, StringAttr name) {
  p << " ";
  p.printAttribute(name);
  p << "(";
  printArgList(p, op.getTensors(), op.getArgs());
  p << ") on " << op.getMesh();
  p.printOptionalAttrDict(op->getAttrs(),
                          /*elidedAttrs=*/{"args", "schema", "callee"});
  p << " : ";
  p.printFunctionalType(op.getTensors().getTypes(), op->getResultTypes());
  Type meshType = op.getMesh().getType();
  if (deriveMesh(op.getTensors().getTypes(), op->getResultTypes()) != meshType)
    p << " in " << meshType;
}

ParseResult AtenOp::parse(OpAsmParser &p, OperationState &state) {
  return parseTensorCall<AtenOp>(p, state, "schema");
}
void AtenOp::print(OpAsmPrinter &p) {
  printTensorCall(*this, p, getSchemaAttr());
}
ParseResult CallFunctionOp::parse(OpAsmParser &p, OperationState &state) {
  return parseTensorCall<CallFunctionOp>(p, state, "callee");
}
void CallFunctionOp::print(OpAsmPrinter &p) {
  printTensorCall(*this, p, getCalleeAttr());
}

//===----------------------------------------------------------------------===//
// Shared verification
//===----------------------------------------------------------------------===//

/// The layouts of two meshes differ for sure: distinct spawn_procs roots, or
/// one root and different views. Block arguments may alias, so they never
/// count as different.
static bool provablyDifferentMeshes(Value a, Value b) {
  if (a == b)
    return false;
  auto la = resolveMeshLayout(a), lb = resolveMeshLayout(b);
  if (!la || !lb)
    return false;
  if (la->root != lb->root)
    return la->root.getDefiningOp<SpawnProcsOp>() &&
           lb->root.getDefiningOp<SpawnProcsOp>();
  return la->view != lb->view;
}

/// WRONG_MESH / WRONG_STREAM checks for an op running on `mesh`.
static LogicalResult verifyPlacement(Operation *op, Value mesh,
                                     ValueRange operands, TypeRange results) {
  auto meshType = dyn_cast<MeshType>(mesh.getType());
  if (!meshType)
    return op->emitOpError("expects a !monarch.mesh operand");
  std::optional<StringRef> stream;
  std::string streamWhere;
  for (auto [i, t] : llvm::enumerate(results)) {
    auto d = dyn_cast<DTensorType>(t);
    if (!d)
      continue;
    if (d.getMesh() != meshType)
      return op->emitOpError("WRONG_MESH: result #")
             << i << " lives on " << d.getMesh() << " but the op runs on "
             << meshType;
    if (!stream) {
      stream = d.getStreamName();
      streamWhere = "result #" + std::to_string(i);
    } else if (*stream != d.getStreamName()) {
      return op->emitOpError("WRONG_STREAM: result #")
             << i << " is owned by " << streamDescription(d.getStreamName())
             << " but " << streamWhere << " by " << streamDescription(*stream);
    }
  }
  for (auto [i, v] : llvm::enumerate(operands)) {
    auto d = dyn_cast<DTensorType>(v.getType());
    if (!d)
      continue;
    if (d.getMesh() != meshType)
      return op->emitOpError("WRONG_MESH: operand #")
             << i << " lives on " << d.getMesh() << " but the op runs on "
             << meshType;
    if (Value defMesh = getDefiningMesh(v))
      if (provablyDifferentMeshes(defMesh, mesh)) {
        auto la = resolveMeshLayout(defMesh), lb = resolveMeshLayout(mesh);
        return op->emitOpError("WRONG_MESH: operand #")
               << i << " was created on mesh [" << la->view.layoutString()
               << "] but the op runs on mesh [" << lb->view.layoutString()
               << "]";
      }
    if (!stream) {
      stream = d.getStreamName();
      streamWhere = "operand #" + std::to_string(i);
    } else if (*stream != d.getStreamName()) {
      return op->emitOpError("WRONG_STREAM: operand #")
             << i << " is owned by " << streamDescription(d.getStreamName())
             << " but the op runs on " << streamDescription(*stream)
             << " (from " << streamWhere << ")";
    }
  }
  return success();
}

/// Checks an argument list: constant kinds ATen accepts, and placeholders
/// matching the tensor operands.
static LogicalResult verifyArgList(Operation *op, ArrayAttr args,
                                   size_t numTensors) {
  int64_t placeholders = 0;
  for (auto [i, a] : llvm::enumerate(args)) {
    if (isa<OperandAttr>(a)) {
      ++placeholders;
      continue;
    }
    if (auto l = dyn_cast<OperandListAttr>(a)) {
      if (l.getCount() < 0)
        return op->emitOpError("argument #") << i << ": negative list size";
      // Bounded by the operand count, so the sum cannot overflow.
      if (l.getCount() > static_cast<int64_t>(numTensors))
        return op->emitOpError("argument #")
               << i << " lists " << l.getCount() << " tensors but the op has "
               << numTensors;
      placeholders += l.getCount();
      continue;
    }
    if (auto l = dyn_cast<OptionalOperandListAttr>(a)) {
      if (!l.getPresent())
        return op->emitOpError("argument #") << i << ": missing entries";
      placeholders += llvm::count(l.getPresent().asArrayRef(), true);
      if (placeholders > static_cast<int64_t>(numTensors))
        break;
      continue;
    }
    if (isa<IntegerAttr, FloatAttr, BoolAttr, StringAttr, DenseI64ArrayAttr,
            DenseF64ArrayAttr, DenseBoolArrayAttr, DTypeAttr, DeviceAttr,
            TorchLayoutAttr, MemoryFormatAttr, NoneAttr, ScalarAttr>(a))
      continue;
    return op->emitOpError("argument #")
           << i << " is not a kind ATen accepts: " << a;
  }
  if (placeholders != static_cast<int64_t>(numTensors))
    return op->emitOpError("argument list names ")
           << placeholders << " tensor operands but the op has " << numTensors;
  return success();
}

//===----------------------------------------------------------------------===//
// Mesh view ops
//===----------------------------------------------------------------------===//

static mesh::Result<MeshView> applyRename(const MeshView &v, ArrayAttr from,
                                          ArrayAttr to) {
  std::vector<std::pair<std::string, std::string>> renames;
  for (auto [f, t] : llvm::zip(toStrings(from), toStrings(to)))
    renames.emplace_back(f, t);
  return v.rename(renames);
}

static mesh::Result<MeshView> applySplit(const MeshView &v, ArrayAttr from,
                                         ArrayAttr to, ArrayAttr sizeNames,
                                         DenseI64ArrayAttr sizeValues) {
  mesh::SplitSpec spec;
  std::vector<std::string> f = toStrings(from);
  for (size_t i = 0; i < f.size() && to && i < to.size(); ++i)
    spec.dims.emplace_back(f[i], toStrings(dyn_cast<ArrayAttr>(to[i])));
  std::vector<std::string> sn = toStrings(sizeNames);
  for (size_t i = 0; i < sn.size() && sizeValues &&
                     i < static_cast<size_t>(sizeValues.size());
       ++i)
    spec.sizes.emplace_back(sn[i], sizeValues[i]);
  return v.split(spec);
}

static mesh::Result<MeshView> applySlice(const MeshView &v, ArrayAttr dims,
                                         DenseI64ArrayAttr starts,
                                         DenseI64ArrayAttr stops,
                                         DenseI64ArrayAttr steps) {
  std::vector<std::string> names = toStrings(dims);
  auto n = static_cast<int64_t>(names.size());
  if (!starts || !stops || !steps || starts.size() != n || stops.size() != n ||
      steps.size() != n)
    return mesh::Result<MeshView>::failure(
        mesh::ErrorKind::Value, "slice needs a start, stop and step per dim");
  MeshView cur = v;
  for (size_t i = 0; i < names.size(); ++i) {
    auto opt = [](int64_t x) -> std::optional<int64_t> {
      if (x == SliceOp::kNone)
        return std::nullopt;
      return x;
    };
    auto next = steps[i] == 0
                    ? cur.slice(names[i], starts[i])
                    : cur.slice(names[i], mesh::Range{opt(starts[i]),
                                                      opt(stops[i]), steps[i]});
    if (!next.ok())
      return next;
    cur = std::move(next).value();
  }
  return cur;
}

static mesh::Result<MeshView> makeView(int64_t offset, ArrayAttr names,
                                       DenseI64ArrayAttr sizes,
                                       DenseI64ArrayAttr strides) {
  std::vector<std::string> n = toStrings(names);
  auto count = static_cast<int64_t>(n.size());
  if (!sizes || !strides || sizes.size() != count || strides.size() != count)
    return mesh::Result<MeshView>::failure(
        mesh::ErrorKind::Value, "view needs a size and a stride per dim");
  std::vector<mesh::Dim> dims;
  for (size_t i = 0; i < n.size(); ++i)
    dims.push_back({n[i], sizes[i], strides[i]});
  return MeshView::create(offset, dims);
}

/// Shared result-type inference: apply the op to the root of its source
/// type (names and sizes of a view do not depend on its strides).
static LogicalResult
inferViewType(MLIRContext *ctx, std::optional<Location> loc, Value source,
              StringRef opName,
              llvm::function_ref<mesh::Result<MeshView>(const MeshView &)> fn,
              SmallVectorImpl<Type> &results) {
  auto type = source ? dyn_cast<MeshType>(source.getType()) : MeshType();
  if (!type)
    return emitOptionalError(loc, "expects a !monarch.mesh source");
  auto view = fn(rootView(type));
  if (!view.ok())
    return emitOptionalError(loc, "invalid ", opName, ": ",
                             formatError(view.error()));
  results.push_back(meshTypeOf(ctx, view.value()));
  return success();
}

mesh::Result<MeshView> RenameOp::apply(const MeshView &source) {
  return applyRename(source, getFrom(), getTo());
}

LogicalResult RenameOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  return inferViewType(
      ctx, loc, adaptor.getSource(), "rename",
      [&](const MeshView &v) {
        return applyRename(v, adaptor.getFromAttr(), adaptor.getToAttr());
      },
      results);
}

LogicalResult RenameOp::verify() {
  if (getFrom().size() != getTo().size())
    return emitOpError("needs as many new names as old ones");
  return success();
}

OpFoldResult RenameOp::fold(FoldAdaptor) {
  if (llvm::all_of(llvm::zip(getFrom(), getTo()),
                   [](auto p) { return std::get<0>(p) == std::get<1>(p); }))
    return getSource();
  return {};
}

mesh::Result<MeshView> SplitOp::apply(const MeshView &source) {
  return applySplit(source, getFrom(), getTo(), getSizeNames(),
                    getSizeValuesAttr());
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *ctx,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  return inferViewType(
      ctx, loc, adaptor.getSource(), "split",
      [&](const MeshView &v) {
        return applySplit(v, adaptor.getFromAttr(), adaptor.getToAttr(),
                          adaptor.getSizeNamesAttr(),
                          adaptor.getSizeValuesAttr());
      },
      results);
}

LogicalResult SplitOp::verify() {
  if (getFrom().size() != getTo().size() ||
      getSizeNames().size() != getSizeValues().size())
    return emitOpError("malformed split specification");
  return success();
}

OpFoldResult SplitOp::fold(FoldAdaptor) {
  if (getFrom().empty() && getSizeNames().empty())
    return getSource();
  return {};
}

mesh::Result<MeshView> SliceOp::apply(const MeshView &source) {
  return applySlice(source, getDims(), getStartsAttr(), getStopsAttr(),
                    getStepsAttr());
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *ctx,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  return inferViewType(
      ctx, loc, adaptor.getSource(), "slice",
      [&](const MeshView &v) {
        return applySlice(v, adaptor.getDimsAttr(), adaptor.getStartsAttr(),
                          adaptor.getStopsAttr(), adaptor.getStepsAttr());
      },
      results);
}

LogicalResult SliceOp::verify() { return success(); }

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getDims().empty())
    return getSource();
  return {};
}

mesh::Result<MeshView> FlattenOp::apply(const MeshView &source) {
  return source.flatten(getName().str());
}

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  StringAttr name = adaptor.getNameAttr();
  return inferViewType(
      ctx, loc, adaptor.getSource(), "flatten",
      [&](const MeshView &v) {
        return v.flatten(name ? name.getValue().str() : std::string());
      },
      results);
}

LogicalResult FlattenOp::verify() {
  // Density depends on the layout, not the type: check it where the
  // source's layout is known.
  if (auto layout = resolveMeshLayout(getSource())) {
    auto flat = layout->view.flatten(getName().str());
    if (!flat.ok())
      return emitOpError("invalid flatten: ") << formatError(flat.error());
  }
  return success();
}

OpFoldResult FlattenOp::fold(FoldAdaptor) {
  auto type = getSource().getType();
  if (type.getNames().size() == 1 && type.getNames()[0] == getNameAttr() &&
      getType() == type)
    return getSource();
  return {};
}

void ViewOp::build(OpBuilder &builder, OperationState &state, Value root,
                   const MeshView &view) {
  SmallVector<Attribute> names;
  for (const std::string &n : view.names())
    names.push_back(builder.getStringAttr(n));
  build(builder, state, root, view.offset(), builder.getArrayAttr(names),
        builder.getDenseI64ArrayAttr(view.sizes()),
        builder.getDenseI64ArrayAttr(view.strides()));
}

mesh::Result<MeshView> ViewOp::apply(const MeshView &) {
  return makeView(getOffset(), getNames(), getSizesAttr(), getStridesAttr());
}

LogicalResult ViewOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  IntegerAttr offset = adaptor.getOffsetAttr();
  auto view = makeView(offset ? offset.getInt() : 0, adaptor.getNamesAttr(),
                       adaptor.getSizesAttr(), adaptor.getStridesAttr());
  if (!view.ok())
    return emitOptionalError(loc, "invalid view: ", formatError(view.error()));
  results.push_back(meshTypeOf(ctx, view.value()));
  return success();
}

LogicalResult ViewOp::verify() {
  if (Operation *def = getSource().getDefiningOp(); def && isMeshViewOp(def))
    return emitOpError("source must be a root mesh (spawn_procs or a block "
                       "argument), not the result of '")
           << def->getName() << "'";
  auto view = apply(rootView(getSource().getType()));
  if (!view.ok())
    return emitOpError("invalid view: ") << formatError(view.error());
  // The largest rank of the view, computed without overflow.
  int64_t procs = getSource().getType().getNumProcs();
  int64_t last = view->offset();
  bool overflow = false;
  for (const mesh::Dim &d : view->dims()) {
    int64_t step;
    overflow |= llvm::MulOverflow(d.size - 1, d.stride, step);
    overflow |= llvm::AddOverflow(last, step, last);
  }
  if (overflow)
    return emitOpError("view reaches past rank ")
           << INT64_MAX << " but the root mesh has " << procs << " procs";
  if (last >= procs)
    return emitOpError("view reaches rank ")
           << last << " but the root mesh has " << procs << " procs";
  return success();
}

OpFoldResult ViewOp::fold(FoldAdaptor) {
  MeshType type = getSource().getType();
  auto view = apply(rootView(type));
  if (view.ok() && view.value() == rootView(type) && getType() == type)
    return getSource();
  return {};
}

namespace {
/// Rewrites a view op whose source is itself a view into one monarch.view of
/// the root (DESIGN.md §6.1: every view is an affine slice of its root).
template <typename OpTy> struct FoldViewChain : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Operation *def = op.getSource().getDefiningOp();
    if (!def || !isMeshViewOp(def))
      return failure();
    auto layout = resolveMeshLayout(op.getResult());
    if (!layout)
      return failure();
    auto view =
        ViewOp::create(rewriter, op.getLoc(), layout->root, layout->view);
    if (view.getType() != op.getType()) {
      rewriter.eraseOp(view);
      return failure();
    }
    rewriter.replaceOp(op, view.getResult());
    return success();
  }
};
} // namespace

void RenameOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *ctx) {
  results.add<FoldViewChain<RenameOp>>(ctx);
}
void SplitOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                          MLIRContext *ctx) {
  results.add<FoldViewChain<SplitOp>>(ctx);
}
void SliceOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                          MLIRContext *ctx) {
  results.add<FoldViewChain<SliceOp>>(ctx);
}
void FlattenOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *ctx) {
  results.add<FoldViewChain<FlattenOp>>(ctx);
}
void ViewOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *ctx) {
  // A view's source is a root (verified), so there is no chain to fold; the
  // folder removes identity views.
}

void SpawnProcsOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), "procs");
}

//===----------------------------------------------------------------------===//
// Mesh layout resolution
//===----------------------------------------------------------------------===//

bool monarch::isMeshViewOp(Operation *op) {
  return isa<RenameOp, SplitOp, SliceOp, FlattenOp, ViewOp>(op);
}

std::optional<MeshLayout> monarch::resolveMeshLayout(Value mesh) {
  if (!mesh || !isa<MeshType>(mesh.getType()))
    return std::nullopt;
  // Walk up to the root, remembering the view ops (innermost last).
  SmallVector<Operation *> chain;
  Value root = mesh;
  while (Operation *def = root.getDefiningOp()) {
    if (!isMeshViewOp(def) || def->getNumOperands() != 1 ||
        !isa<MeshType>(def->getOperand(0).getType()))
      break;
    chain.push_back(def);
    root = def->getOperand(0);
  }
  MeshView view = rootView(cast<MeshType>(root.getType()));
  // Apply from the root outwards; a monarch.view restarts from its layout.
  for (Operation *op : llvm::reverse(chain)) {
    mesh::Result<MeshView> next =
        llvm::TypeSwitch<Operation *, mesh::Result<MeshView>>(op)
            .Case<RenameOp, SplitOp, SliceOp, FlattenOp, ViewOp>(
                [&](auto viewOp) { return viewOp.apply(view); });
    if (!next.ok())
      return std::nullopt;
    view = std::move(next).value();
  }
  return MeshLayout{root, std::move(view)};
}

Value monarch::getDefiningMesh(Value tensor) {
  // Ops that keep their input's mesh (collectives, borrows, waits) are looked
  // through, up to a bound so that hostile IR cannot make this slow.
  for (int depth = 0; depth < 64 && tensor; ++depth) {
    Operation *def = tensor.getDefiningOp();
    if (!def)
      return {};
    if (auto op = dyn_cast<AtenOp>(def))
      return op.getMesh();
    if (auto op = dyn_cast<CallFunctionOp>(def))
      return op.getMesh();
    if (auto op = dyn_cast<RankOp>(def))
      return op.getMesh();
    if (auto op = dyn_cast<IndexTensorOp>(def))
      return op.getMesh();
    if (auto op = dyn_cast<ToMeshOp>(def))
      return op.getDest();
    if (auto op = dyn_cast<ToMeshStartOp>(def))
      return op.getDest();
    if (auto op = dyn_cast<ReduceOp>(def))
      tensor = op.getInput();
    else if (auto op = dyn_cast<ReduceStartOp>(def))
      tensor = op.getInput();
    else if (auto op = dyn_cast<WaitOp>(def))
      tensor = op.getToken();
    else if (auto op = dyn_cast<BorrowOp>(def))
      tensor = op.getInput();
    else
      return {};
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Tensor ops
//===----------------------------------------------------------------------===//

LogicalResult AtenOp::verify() {
  StringRef schema = getSchema();
  size_t sep = schema.find("::");
  if (sep == StringRef::npos || sep == 0 || sep + 2 >= schema.size())
    return emitOpError("schema must be 'namespace::name[.overload]', got '")
           << schema << "'";
  if (failed(verifyArgList(*this, getArgs(), getTensors().size())))
    return failure();
  return verifyPlacement(*this, getMesh(), getTensors(),
                         getResults().getTypes());
}

LogicalResult CallFunctionOp::verify() {
  if (getCallee().empty())
    return emitOpError("needs the name of a registered function");
  if (failed(verifyArgList(*this, getArgs(), getTensors().size())))
    return failure();
  return verifyPlacement(*this, getMesh(), getTensors(),
                         getResults().getTypes());
}

/// Unknown / repeated dim checks shared by rank, reduce and fetch.
static LogicalResult verifyDimNames(Operation *op, MeshType mesh,
                                    ArrayAttr dims, StringRef what) {
  llvm::SmallDenseSet<StringRef> seen;
  for (Attribute a : dims) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (!mesh.getDimIndex(name)) {
      SmallVector<StringRef> names;
      for (StringAttr n : mesh.getNames())
        names.push_back(n.getValue());
      return op->emitOpError()
             << what << " over unknown mesh dim '" << name << "' (the mesh has "
             << (names.empty() ? "no dims" : "") << llvm::join(names, ", ")
             << ")";
    }
    if (!seen.insert(name).second)
      return op->emitOpError()
             << what << " names mesh dim '" << name << "' more than once";
  }
  return success();
}

LogicalResult RankOp::verify() {
  MeshType mesh = getMesh().getType();
  if (getDims().empty())
    return emitOpError("needs at least one mesh dim");
  if (failed(verifyDimNames(*this, mesh, getDims(), "rank")))
    return failure();
  auto type = getResult().getType();
  if (type.getLocal().getRank() != 0 ||
      !type.getLocal().getElementType().isSignlessInteger(64))
    return emitOpError("result must be a 0-d i64 tensor, got ")
           << type.getLocal();
  return success();
}

LogicalResult IndexTensorOp::verify() {
  auto type = getResult().getType();
  if (type.getLocal().getRank() != 0 ||
      !type.getLocal().getElementType().isSignlessInteger(64))
    return emitOpError("result must be a 0-d i64 tensor, got ")
           << type.getLocal();
  return success();
}

//===----------------------------------------------------------------------===//
// Reduce
//===----------------------------------------------------------------------===//

template <typename OpTy> static SmallVector<StringRef> effectiveDims(OpTy op) {
  SmallVector<StringRef> dims;
  for (Attribute a : op.getDims())
    dims.push_back(cast<StringAttr>(a).getValue());
  if (dims.empty())
    for (StringAttr n : op.getInput().getType().getMesh().getNames())
      dims.push_back(n.getValue());
  return dims;
}

/// Checks DESIGN.md §6.2 and returns the type the reduce produces.
template <typename OpTy> static FailureOr<DTensorType> verifyReduce(OpTy op) {
  DTensorType input = op.getInput().getType();
  MeshType mesh = input.getMesh();
  if (failed(verifyDimNames(op, mesh, op.getDims(), "reduce")))
    return failure();
  SmallVector<StringRef> dims = effectiveDims(op);
  bool stack = op.getReduction() == ReductionKind::stack;
  bool scatter = op.getScatter();
  if ((stack || scatter) && dims.size() > 1)
    return op.emitOpError("reduce with ")
           << (stack ? "stack" : "scatter") << " over several dims ("
           << llvm::join(dims, ", ")
           << ") is not supported; reduce over one dim";
  if (op.getInplace() && scatter)
    return op.emitOpError("in-place reduce cannot scatter");
  if (op.getInplace() && op.getOut())
    return op.emitOpError("in-place reduce cannot also write `into` a tensor");
  int64_t n = 1;
  for (StringRef d : dims)
    n *= mesh.getSizes()[*mesh.getDimIndex(d)];
  ArrayRef<int64_t> shape = input.getShape();
  SmallVector<int64_t> result(shape);
  if (scatter) {
    if (shape.empty())
      return op.emitOpError("scatter needs a tensor of rank >= 1");
    if (!ShapedType::isDynamic(shape[0]) && shape[0] != n)
      return op.emitOpError("scatter over '")
             << dims.front() << "' needs the leading size to equal the group "
             << "size " << n << ", got " << shape[0];
    if (!stack)
      result.erase(result.begin());
  } else if (stack) {
    result.insert(result.begin(), n);
  }
  auto local = RankedTensorType::get(result, input.getLocal().getElementType());
  DTensorType expected = input.withLocal(local);
  if (op.getInplace() && expected != input)
    return op.emitOpError("in-place stack changes the shape to ")
           << local << "; use `into` or a new result";
  if (Value out = op.getOut()) {
    auto outType = cast<DTensorType>(out.getType());
    if (outType != expected)
      return op.emitOpError("`into` tensor has type ")
             << outType << " but the reduce produces " << expected;
  }
  return expected;
}

SmallVector<StringRef> ReduceOp::getEffectiveDims() {
  return effectiveDims(*this);
}
SmallVector<StringRef> ReduceStartOp::getEffectiveDims() {
  return effectiveDims(*this);
}

LogicalResult ReduceOp::verify() {
  FailureOr<DTensorType> expected = verifyReduce(*this);
  if (failed(expected))
    return failure();
  if (getResult().getType() != *expected)
    return emitOpError("result type ")
           << getResult().getType() << " does not match the reduce's "
           << *expected;
  return success();
}

LogicalResult ReduceStartOp::verify() {
  FailureOr<DTensorType> expected = verifyReduce(*this);
  if (failed(expected))
    return failure();
  if (getToken().getType().getValueType() != *expected)
    return emitOpError("token type ")
           << getToken().getType() << " does not match the reduce's "
           << *expected;
  return success();
}

//===----------------------------------------------------------------------===//
// Moves and fetches
//===----------------------------------------------------------------------===//

/// The checks of to_mesh and to_mesh_start: `out` is the copy's type.
static LogicalResult verifyToMesh(Operation *op, DTensorType in,
                                  DTensorType out, MeshType dst) {
  MeshType src = in.getMesh();
  if (in.getLocal() != out.getLocal())
    return op->emitOpError("result's local type ")
           << out.getLocal() << " differs from the input's " << in.getLocal();
  if (in.getStreamName() != out.getStreamName())
    return op->emitOpError("WRONG_STREAM: input is owned by ")
           << streamDescription(in.getStreamName()) << " but the result by "
           << streamDescription(out.getStreamName());
  for (auto [name, size] : llvm::zip(src.getNames(), src.getSizes())) {
    auto idx = dst.getDimIndex(name.getValue());
    if (!idx)
      return op->emitOpError(
                 "to_mesh between incompatible meshes: source dim '")
             << name.getValue() << "' is not in the destination " << dst;
    if (dst.getSizes()[*idx] != size)
      return op->emitOpError(
                 "to_mesh between incompatible meshes: source dim '")
             << name.getValue() << "' has size " << size << " but size "
             << dst.getSizes()[*idx] << " in the destination";
  }
  return success();
}

LogicalResult ToMeshOp::verify() {
  return verifyToMesh(*this, getInput().getType(), getResult().getType(),
                      getDest().getType());
}

LogicalResult ToMeshStartOp::verify() {
  auto out = dyn_cast<DTensorType>(getToken().getType().getValueType());
  if (!out)
    return emitOpError("token's value type must be a distributed tensor, got ")
           << getToken().getType().getValueType();
  if (out.getMesh() != getDest().getType())
    return emitOpError("token's tensor is on ")
           << out.getMesh() << " but the destination is "
           << getDest().getType();
  return verifyToMesh(*this, getInput().getType(), out, getDest().getType());
}

LogicalResult SliceMeshOp::verify() {
  DTensorType in = getInput().getType(), out = getResult().getType();
  auto view = applySlice(rootView(in.getMesh()), getDims(), getStartsAttr(),
                         getStopsAttr(), getStepsAttr());
  if (!view.ok())
    return emitOpError("invalid slice: ") << formatError(view.error());
  DTensorType expected = in.withMesh(meshTypeOf(getContext(), view.value()));
  if (out != expected)
    return emitOpError("result type ")
           << out << " does not match the slice's " << expected;
  return success();
}

template <typename OpTy> static LogicalResult verifyFetch(OpTy op) {
  DTensorType in = op.getInput().getType();
  MeshType mesh = in.getMesh();
  if (op.getDims().size() != op.getCoords().size())
    return op.emitOpError("needs one coordinate per dim");
  if (failed(verifyDimNames(op, mesh, op.getDims(), "fetch")))
    return failure();
  for (auto [a, c] : llvm::zip(op.getDims(), op.getCoords())) {
    StringRef name = cast<StringAttr>(a).getValue();
    int64_t size = mesh.getSizes()[*mesh.getDimIndex(name)];
    if (c < 0 || c >= size)
      return op.emitOpError("IndexError: coordinate ")
             << c << " is out of range for dim '" << name << "' of size "
             << size;
  }
  Type value = op.getResult().getType().getValueType();
  if (value != in.getLocal())
    return op.emitOpError("fetched value has type ")
           << value << " but the shard is " << in.getLocal();
  return success();
}

LogicalResult FetchShardOp::verify() { return verifyFetch(*this); }
LogicalResult InspectOp::verify() { return verifyFetch(*this); }

//===----------------------------------------------------------------------===//
// Streams and borrows
//===----------------------------------------------------------------------===//

LogicalResult BorrowOp::verify() {
  DTensorType in = getInput().getType();
  StringAttr name = getStream().getType().getName();
  StringRef stream = name ? name.getValue() : StringRef();
  if (in.getStreamName() == stream)
    return emitOpError("cannot borrow a tensor onto ")
           << streamDescription(stream) << ", which already owns it";
  DTensorType expected = in.withStream(stream);
  if (getResult().getType() != expected)
    return emitOpError("borrowed tensor must have type ")
           << expected << ", got " << getResult().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Actors
//===----------------------------------------------------------------------===//

LogicalResult EndpointCallOp::verify() {
  ActorMeshType actor = getActor().getType();
  MeshType mesh = actor.getMesh();
  for (auto [i, v] : llvm::enumerate(getArgs()))
    if (auto d = dyn_cast<DTensorType>(v.getType()); d && d.getMesh() != mesh)
      return emitOpError("WRONG_MESH: argument #")
             << i << " lives on " << d.getMesh() << " but the actors on "
             << mesh;
  AdverbKind adverb = getAdverb();
  if (adverb == AdverbKind::call_one && mesh.getNumProcs() != 1)
    return emitOpError("call_one needs a mesh of one actor, this one has ")
           << mesh.getNumProcs();
  if (adverb == AdverbKind::broadcast && getNumResults() != 0)
    return emitOpError("broadcast returns nothing");
  for (auto [i, t] : llvm::enumerate(getResultTypes())) {
    if (adverb == AdverbKind::rref) {
      auto d = dyn_cast<DTensorType>(t);
      if (!d)
        return emitOpError("rref result #")
               << i << " must be a distributed tensor, got " << t;
      if (d.getMesh() != mesh)
        return emitOpError("WRONG_MESH: rref result #")
               << i << " lives on " << d.getMesh() << " but the actors on "
               << mesh;
    } else if (!isa<HostType>(t)) {
      return emitOpError() << stringifyAdverbKind(adverb) << " result #" << i
                           << " must be a !monarch.host value, got " << t;
    }
  }
  return success();
}

#define GET_OP_CLASSES
#include "monarch/Dialect/Monarch/IR/MonarchOps.cpp.inc"
