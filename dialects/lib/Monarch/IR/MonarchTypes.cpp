//===- MonarchTypes.cpp - Types of the monarch dialect -------------------===//

#include "monarch/Dialect/Monarch/IR/MonarchTypes.h"
#include "monarch/Dialect/Monarch/IR/MonarchDialect.h"
#include "monarch/mesh/MeshView.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace monarch;

#define GET_TYPEDEF_CLASSES
#include "monarch/Dialect/Monarch/IR/MonarchTypes.cpp.inc"

static_assert(MeshType::kMaxProcs == monarch::mesh::kMaxMeshRanks,
              "the dialect and the runtime bound meshes alike");

void MonarchDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "monarch/Dialect/Monarch/IR/MonarchTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// MeshType
//===----------------------------------------------------------------------===//

LogicalResult MeshType::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> names,
                               ArrayRef<int64_t> sizes) {
  if (names.size() != sizes.size())
    return emitError() << "mesh has " << names.size() << " names but "
                       << sizes.size() << " sizes";
  llvm::SmallDenseSet<StringAttr> seen;
  int64_t procs = 1;
  for (auto [name, size] : llvm::zip(names, sizes)) {
    if (!name || name.getValue().empty())
      return emitError() << "mesh dimension names must not be empty";
    if (!seen.insert(name).second)
      return emitError() << "duplicate mesh dimension '" << name.getValue()
                         << "'";
    if (size < 1)
      return emitError() << "mesh dimension '" << name.getValue()
                         << "' must have a positive size, got " << size;
    // Bounded (arithmetically: `procs` never exceeds kMaxProcs before the
    // multiply, so it cannot overflow) as the plan loader and spawn bound
    // them, so a program that verifies is never refused for its size later
    // and every rank, offset and stride of a view fits in int64 arithmetic.
    if (size > kMaxProcs || (procs *= size) > kMaxProcs)
      return emitError() << "a mesh holds at most " << kMaxProcs
                         << " procs; dimension '" << name.getValue()
                         << "' brings it past that";
  }
  return success();
}

int64_t MeshType::getNumProcs() const {
  int64_t n = 1;
  for (int64_t s : getSizes())
    n *= s;
  return n;
}

std::optional<unsigned> MeshType::getDimIndex(StringRef name) const {
  for (auto [i, n] : llvm::enumerate(getNames()))
    if (n.getValue() == name)
      return i;
  return std::nullopt;
}

std::vector<std::pair<std::string, int64_t>> MeshType::getShape() const {
  std::vector<std::pair<std::string, int64_t>> shape;
  for (auto [n, s] : llvm::zip(getNames(), getSizes()))
    shape.emplace_back(n.getValue().str(), s);
  return shape;
}

void MeshType::printShape(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleaveComma(
      llvm::zip(getNames(), getSizes()), printer, [&](auto pair) {
        printer.printKeywordOrString(std::get<0>(pair).getValue());
        printer << " = " << std::get<1>(pair);
      });
  printer << ">";
}

MeshType MeshType::parseShape(AsmParser &parser) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  auto parseDim = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    return success();
  };
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater,
                                     parseDim))
    return {};
  return MeshType::getChecked([&] { return parser.emitError(loc); },
                              parser.getContext(), names, sizes);
}

Type MeshType::parse(AsmParser &parser) { return parseShape(parser); }

void MeshType::print(AsmPrinter &printer) const { printShape(printer); }

//===----------------------------------------------------------------------===//
// DTensorType
//===----------------------------------------------------------------------===//

LogicalResult DTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  RankedTensorType local, MeshType mesh,
                                  StringAttr stream) {
  if (!local || !mesh)
    return emitError() << "distributed tensor needs a local type and a mesh";
  if (local.getEncoding())
    return emitError() << "the local type of a distributed tensor must not "
                          "have an encoding";
  return success();
}

Type DTensorType::parse(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<int64_t> shape;
  Type elementType;
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/true,
                                /*withTrailingX=*/true) ||
      parser.parseType(elementType) || parser.parseComma())
    return {};
  MeshType mesh = MeshType::parseShape(parser);
  if (!mesh)
    return {};
  StringAttr stream;
  if (succeeded(parser.parseOptionalComma())) {
    std::string name;
    if (parser.parseKeyword("stream") || parser.parseEqual() ||
        parser.parseString(&name))
      return {};
    if (!name.empty())
      stream = parser.getBuilder().getStringAttr(name);
  }
  if (parser.parseGreater())
    return {};
  auto emit = [&] { return parser.emitError(loc); };
  auto local = RankedTensorType::getChecked(emit, shape, elementType);
  if (!local)
    return {};
  return DTensorType::getChecked(emit, parser.getContext(), local, mesh,
                                 stream);
}

void DTensorType::print(AsmPrinter &printer) const {
  printer << "<";
  for (int64_t d : getShape()) {
    if (ShapedType::isDynamic(d))
      printer << "?";
    else
      printer << d;
    printer << "x";
  }
  printer << getLocal().getElementType() << ", ";
  getMesh().printShape(printer);
  if (!getStreamName().empty()) {
    printer << ", stream = ";
    printer.printString(getStreamName());
  }
  printer << ">";
}

DTensorType DTensorType::withMesh(MeshType mesh) const {
  return DTensorType::get(getContext(), getLocal(), mesh, getStream());
}

DTensorType DTensorType::withStream(StringRef stream) const {
  return DTensorType::get(
      getContext(), getLocal(), getMesh(),
      stream.empty() ? StringAttr() : StringAttr::get(getContext(), stream));
}

DTensorType DTensorType::withLocal(RankedTensorType local) const {
  return DTensorType::get(getContext(), local, getMesh(), getStream());
}

//===----------------------------------------------------------------------===//
// ActorMeshType
//===----------------------------------------------------------------------===//

Type ActorMeshType::parse(AsmParser &parser) {
  std::string className;
  if (parser.parseLess() || parser.parseString(&className) ||
      parser.parseComma())
    return {};
  MeshType mesh = MeshType::parseShape(parser);
  if (!mesh || parser.parseGreater())
    return {};
  return ActorMeshType::get(parser.getContext(),
                            parser.getBuilder().getStringAttr(className), mesh);
}

void ActorMeshType::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printString(getClassName().getValue());
  printer << ", ";
  getMesh().printShape(printer);
  printer << ">";
}
