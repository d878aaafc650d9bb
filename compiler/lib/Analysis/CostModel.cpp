//===- CostModel.cpp - Predicted cost of monarch ops ---------------------===//

#include "monarch/Compiler/Analysis/CostModel.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>

using namespace mlir;
using namespace monarch;

StringRef monarch::stringifyCollectiveKind(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::PointToPoint:
    return "p2p";
  }
  return "";
}

static std::optional<CollectiveKind> parseCollectiveKind(StringRef name) {
  for (int i = 0; i < 5; ++i)
    if (stringifyCollectiveKind(CollectiveKind(i)) == name)
      return CollectiveKind(i);
  return std::nullopt;
}

CostModel CostModel::forDevice(StringRef device) {
  CostModel m;
  auto setAll = [&](double alpha, double bytesPerSec) {
    for (AlphaBeta &ab : m.collectives)
      ab = {alpha, 1.0 / bytesPerSec};
  };
  if (device == "cpu") {
    // A few cores of a server, Gloo over loopback / 10 GbE TCP.
    m.device = "cpu";
    m.flopsPerSecond = 1e11;
    m.bytesPerSecond = 2e10;
    m.launchSeconds = 2e-6;
    setAll(5e-5, 1.25e9);
    return m;
  }
  if (device == "a100") {
    m.device = "a100";
    m.flopsPerSecond = 1.56e14; // TF32 dense
    m.bytesPerSecond = 1.5e12;
    m.launchSeconds = 5e-6;
    setAll(1e-5, 2.0e11); // NVLink 3 bus bandwidth per GPU
    m.dimLinks["host"] = {2e-5, 1.0 / 2.5e10};
    return m;
  }
  // h200: TF32-ish dense throughput, HBM3e, NVLink 4 inside a host,
  // 400 Gb/s InfiniBand across hosts.
  m.device = "h200";
  m.flopsPerSecond = 4.9e14;
  m.bytesPerSecond = 4.8e12;
  m.launchSeconds = 5e-6;
  setAll(1e-5, 3.6e11);
  m.dimLinks["host"] = {2e-5, 1.0 / 5.0e10};
  return m;
}

static llvm::Error profileError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "cost profile: " + msg);
}

static llvm::Error readAlphaBeta(const llvm::json::Object &obj, StringRef what,
                                 AlphaBeta &ab) {
  if (std::optional<double> a = obj.getNumber("alpha_s"))
    ab.alpha = *a;
  if (std::optional<double> bw = obj.getNumber("bytes_per_s")) {
    if (*bw <= 0)
      return profileError(what + ".bytes_per_s must be positive");
    ab.beta = 1.0 / *bw;
  }
  if (ab.alpha < 0)
    return profileError(what + ".alpha_s must not be negative");
  return llvm::Error::success();
}

llvm::Expected<CostModel> CostModel::fromJSON(StringRef text) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return profileError(llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return profileError("expected a JSON object");
  CostModel m = forDevice(root->getString("device").value_or("h200"));
  if (std::optional<StringRef> dev = root->getString("device"))
    m.device = dev->str();
  auto positive = [&](StringRef key, double &field) -> llvm::Error {
    if (std::optional<double> v = root->getNumber(key)) {
      if (*v <= 0)
        return profileError(key + " must be positive");
      field = *v;
    }
    return llvm::Error::success();
  };
  if (llvm::Error e = positive("flops_per_s", m.flopsPerSecond))
    return std::move(e);
  if (llvm::Error e = positive("bytes_per_s", m.bytesPerSecond))
    return std::move(e);
  if (std::optional<double> v = root->getNumber("launch_s"))
    m.launchSeconds = std::max(0.0, *v);
  if (const llvm::json::Object *colls = root->getObject("collectives")) {
    for (const auto &[key, value] : *colls) {
      std::optional<CollectiveKind> kind = parseCollectiveKind(key);
      const llvm::json::Object *obj = value.getAsObject();
      if (!kind || !obj)
        return profileError("unknown collective '" + key.str() + "'");
      if (llvm::Error e = readAlphaBeta(*obj, key, m.collectives[int(*kind)]))
        return std::move(e);
    }
  }
  if (const llvm::json::Object *dims = root->getObject("dims")) {
    for (const auto &[key, value] : *dims) {
      const llvm::json::Object *obj = value.getAsObject();
      if (!obj)
        return profileError("dims." + key.str() + " must be an object");
      AlphaBeta ab = m.collectives[0];
      if (llvm::Error e = readAlphaBeta(*obj, "dims." + key.str(), ab))
        return std::move(e);
      m.dimLinks[key] = ab;
    }
  }
  return m;
}

llvm::Expected<CostModel> CostModel::fromFile(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return profileError("cannot read '" + path +
                        "': " + buffer.getError().message());
  return fromJSON((*buffer)->getBuffer());
}

llvm::Expected<CostModel> CostModel::load(StringRef device, StringRef path) {
  if (path.empty())
    return forDevice(device);
  return fromFile(path);
}

FailureOr<CostModel> CostModel::loadOrEmit(Operation *anchor, StringRef device,
                                           StringRef path) {
  llvm::Expected<CostModel> model = load(device, path);
  if (!model) {
    anchor->emitError(llvm::toString(model.takeError()));
    return failure();
  }
  return std::move(*model);
}

double CostModel::computeSeconds(double flops, double bytes) const {
  return launchSeconds +
         std::max(flops / flopsPerSecond, bytes / bytesPerSecond);
}

double CostModel::collectiveSeconds(CollectiveKind kind, int64_t n,
                                    double bytes,
                                    ArrayRef<StringRef> dims) const {
  AlphaBeta ab = collectives[int(kind)];
  for (StringRef d : dims) {
    auto it = dimLinks.find(d);
    if (it != dimLinks.end()) {
      ab.alpha = std::max(ab.alpha, it->second.alpha);
      ab.beta = std::max(ab.beta, it->second.beta);
    }
  }
  if (kind == CollectiveKind::PointToPoint)
    return ab.alpha + bytes * ab.beta;
  if (n <= 1)
    return 0;
  double frac = double(n - 1) / double(n);
  // Ring algorithms: an all-reduce is a reduce-scatter plus an all-gather.
  if (kind == CollectiveKind::AllReduce)
    return 2 * (n - 1) * ab.alpha + 2 * frac * bytes * ab.beta;
  return (n - 1) * ab.alpha + frac * bytes * ab.beta;
}

//===----------------------------------------------------------------------===//
// Per-op estimates
//===----------------------------------------------------------------------===//

static double numElements(DTensorType t) {
  double n = 1;
  for (int64_t d : t.getShape())
    n *= ShapedType::isDynamic(d) ? 1 : d;
  return n;
}

static double elementBytes(Type elem) {
  if (auto c = dyn_cast<ComplexType>(elem))
    return 2 * elementBytes(c.getElementType());
  if (elem.isIntOrFloat())
    return std::max<double>(1, elem.getIntOrFloatBitWidth() / 8);
  return 4;
}

static double tensorBytes(Type type) {
  auto t = dyn_cast<DTensorType>(type);
  if (!t)
    return 0;
  return numElements(t) * elementBytes(t.getLocal().getElementType());
}

/// `aten::addmm.out` -> `addmm`.
static StringRef baseName(StringRef schema) {
  schema.consume_front("aten::");
  return schema.substr(0, schema.find('.'));
}

static OpCost estimateAten(const CostModel &m, AtenOp op) {
  OpCost c;
  c.kind = OpCost::Kind::Compute;
  for (Value v : op.getTensors())
    c.bytes += tensorBytes(v.getType());
  double outElems = 0;
  for (Value r : op.getResults()) {
    c.bytes += tensorBytes(r.getType());
    outElems += numElements(cast<DTensorType>(r.getType()));
  }
  StringRef name = baseName(op.getSchema());
  name.consume_back("_");
  auto tensors = op.getTensors();
  auto shapeOf = [&](unsigned i) -> ArrayRef<int64_t> {
    if (i >= tensors.size())
      return {};
    return cast<DTensorType>(tensors[i].getType()).getShape();
  };
  // Contractions: 2 * |out| * K, K the contracted size of the left matrix.
  int lhs = llvm::StringSwitch<int>(name)
                .Cases({"mm", "bmm", "matmul", "linear"}, 0)
                .Cases({"addmm", "addbmm", "baddbmm"}, 1)
                .Default(-1);
  if (lhs >= 0) {
    ArrayRef<int64_t> a = shapeOf(lhs);
    double k = a.empty() || ShapedType::isDynamic(a.back()) ? 1 : a.back();
    if (outElems == 0 && !tensors.empty()) // in-place / out= forms
      outElems = numElements(cast<DTensorType>(tensors[0].getType()));
    c.flops = 2 * outElems * k + (lhs == 1 ? outElems : 0);
  } else {
    // Elementwise ops and reductions touch each input element about once.
    double inElems = 0;
    for (Value v : tensors)
      inElems = std::max(inElems, numElements(cast<DTensorType>(v.getType())));
    c.flops = std::max(inElems, outElems);
  }
  c.seconds = m.computeSeconds(c.flops, c.bytes);
  return c;
}

template <typename ReduceLike>
static OpCost estimateReduce(const CostModel &m, ReduceLike op) {
  OpCost c;
  c.kind = OpCost::Kind::Collective;
  auto in = cast<DTensorType>(op.getInput().getType());
  SmallVector<StringRef> dims = op.getEffectiveDims();
  int64_t n = 1;
  for (StringRef d : dims)
    if (std::optional<unsigned> idx = in.getMesh().getDimIndex(d))
      n *= in.getMesh().getSizes()[*idx];
  c.groupSize = n;
  c.bytes = tensorBytes(in);
  bool stack = op.getReduction() == ReductionKind::stack;
  if (stack && op.getScatter())
    c.collective = CollectiveKind::AllToAll;
  else if (stack) {
    c.collective = CollectiveKind::AllGather;
    c.bytes *= n; // the gathered output
  } else if (op.getScatter())
    c.collective = CollectiveKind::ReduceScatter;
  else
    c.collective = CollectiveKind::AllReduce;
  c.seconds =
      m.launchSeconds + m.collectiveSeconds(c.collective, n, c.bytes, dims);
  return c;
}

OpCost CostModel::estimate(Operation *op) const {
  if (auto aten = dyn_cast<AtenOp>(op))
    return estimateAten(*this, aten);
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return estimateReduce(*this, reduce);
  if (auto start = dyn_cast<ReduceStartOp>(op))
    return estimateReduce(*this, start);
  OpCost c;
  if (isa<ToMeshOp, ToMeshStartOp, FetchShardOp, InspectOp>(op)) {
    c.kind = OpCost::Kind::Collective;
    c.collective = CollectiveKind::PointToPoint;
    c.bytes = tensorBytes(op->getOperand(0).getType());
    c.seconds = launchSeconds + collectiveSeconds(c.collective, 2, c.bytes);
    return c;
  }
  if (isa<CallFunctionOp, RankOp, IndexTensorOp>(op) ||
      (isa<EndpointCallOp>(op) && op->getNumResults())) {
    c.kind = OpCost::Kind::Compute;
    for (Value v : op->getOperands())
      c.bytes += tensorBytes(v.getType());
    for (Value v : op->getResults())
      c.bytes += tensorBytes(v.getType());
    c.seconds = computeSeconds(0, c.bytes);
  }
  return c;
}
