//===- BucketCollectives.cpp - Merge small all-reduces -------------------===//
//
// PyTorch DDP's gradient buckets: consecutive small in-place all-reduces of
// one communicator run as one all-reduce of a flat buffer.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Analysis/TensorEffects.h"
#include "monarch/Compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/raw_ostream.h"

namespace monarch {
#define GEN_PASS_DEF_BUCKETCOLLECTIVES
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {

struct Member {
  // Op handles are not const-correct.
  mutable ReduceStartOp start;
  mutable WaitOp wait;
  Value mesh;
  int64_t elements;
  int64_t bytes;
};

/// The mesh value the tensor's producer names, if any.
Value meshOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (auto aten = dyn_cast_or_null<AtenOp>(def))
    return aten.getMesh();
  if (auto call = dyn_cast_or_null<CallFunctionOp>(def))
    return call.getMesh();
  return {};
}

/// Communicator, reduction, element type and stream: what must match.
std::string bucketKey(ReduceStartOp op) {
  std::string key;
  llvm::raw_string_ostream os(key);
  auto in = cast<DTensorType>(op.getInput().getType());
  os << in.getMesh() << '|' << in.getStreamName() << '|'
     << in.getLocal().getElementType() << '|' << int(op.getReduction());
  SmallVector<StringRef> dims = op.getEffectiveDims();
  llvm::sort(dims);
  for (StringRef d : dims)
    os << '|' << d;
  return key;
}

std::optional<Member> candidate(ReduceStartOp op, uint64_t maxBytes) {
  if (!op.getInplace() || op.getScatter() || op.getOut() ||
      op.getReduction() == ReductionKind::stack || !op.getToken().hasOneUse())
    return std::nullopt;
  auto wait = dyn_cast<WaitOp>(*op.getToken().getUsers().begin());
  if (!wait || wait->getBlock() != op->getBlock())
    return std::nullopt;
  auto type = cast<DTensorType>(op.getInput().getType());
  if (!type.getLocal().hasStaticShape() ||
      !type.getLocal().getElementType().isIntOrFloat())
    return std::nullopt;
  Value mesh = meshOf(op.getInput());
  if (!mesh)
    return std::nullopt;
  int64_t elements = type.getLocal().getNumElements();
  int64_t bytes =
      elements *
      std::max<int64_t>(
          1, type.getLocal().getElementType().getIntOrFloatBitWidth() / 8);
  if (uint64_t(bytes) > maxBytes)
    return std::nullopt;
  return Member{op, wait, mesh, elements, bytes};
}

struct BucketCollectivesPass
    : monarch::impl::BucketCollectivesBase<BucketCollectivesPass> {
  using Base::Base;

  /// Can `next` join `bucket`? Nothing from the bucket's first start to
  /// `next` may touch a member's tensor (its wait included), and nothing
  /// of the same communicator may sit in between.
  bool canJoin(ArrayRef<Member> bucket, const Member &next, int64_t bytes) {
    const Member &first = bucket.front();
    if (bucketKey(first.start) != bucketKey(next.start) ||
        first.mesh != next.mesh || uint64_t(bytes + next.bytes) > maxBytes)
      return false;
    std::string key = bucketKey(first.start);
    for (Operation *op = first.start->getNextNode(); op != next.start;
         op = op->getNextNode()) {
      if (auto other = dyn_cast<ReduceStartOp>(op))
        if (llvm::none_of(bucket,
                          [&](const Member &m) { return m.start == other; }))
          return false;
      if (isa<ReduceOp>(op))
        return false;
      for (const Member &m : bucket)
        if (op != m.start && usesStorage(op, storageRoot(m.start.getInput())))
          return false;
    }
    return true;
  }

  void rewrite(ArrayRef<Member> bucket) {
    MLIRContext *ctx = &getContext();
    ReduceStartOp last = bucket.back().start;
    Value mesh = bucket.front().mesh;
    Location loc = last.getLoc();
    OpBuilder b(last);
    auto operand = OperandAttr::get(ctx);
    auto type0 = cast<DTensorType>(last.getInput().getType());
    Type elem = type0.getLocal().getElementType();
    auto flatType = [&](int64_t n) {
      return type0.withLocal(RankedTensorType::get({n}, elem));
    };

    SmallVector<Value> flats;
    int64_t total = 0;
    SmallVector<int64_t> sizes;
    for (const Member &m : bucket) {
      flats.push_back(
          AtenOp::create(b, m.start.getLoc(), TypeRange{flatType(m.elements)},
                         "aten::reshape", ValueRange{m.start.getInput()},
                         b.getArrayAttr({operand, b.getDenseI64ArrayAttr(-1)}),
                         mesh)
              .getResult(0));
      sizes.push_back(m.elements);
      total += m.elements;
    }
    Value flat =
        AtenOp::create(b, loc, TypeRange{flatType(total)}, "aten::cat", flats,
                       b.getArrayAttr({OperandListAttr::get(ctx, flats.size()),
                                       b.getI64IntegerAttr(0)}),
                       mesh)
            .getResult(0);
    auto start = ReduceStartOp::create(
        b, loc, AsyncType::get(ctx, flat.getType()), flat, last.getDims(),
        last.getReductionAttr(), UnitAttr(), b.getUnitAttr(), Value());

    // Wait where the first member was waited for.
    WaitOp firstWait = bucket.front().wait;
    for (const Member &m : bucket)
      if (m.wait->isBeforeInBlock(firstWait))
        firstWait = m.wait;
    b.setInsertionPoint(firstWait);
    Value reduced =
        WaitOp::create(b, firstWait.getLoc(), flat.getType(), start.getToken())
            .getResult();
    SmallVector<Type> partTypes;
    for (int64_t n : sizes)
      partTypes.push_back(flatType(n));
    auto parts =
        AtenOp::create(b, firstWait.getLoc(), partTypes,
                       "aten::split_with_sizes", ValueRange{reduced},
                       b.getArrayAttr({operand, b.getDenseI64ArrayAttr(sizes),
                                       b.getI64IntegerAttr(0)}),
                       mesh);
    for (auto [i, m] : llvm::enumerate(bucket)) {
      Value g = m.start.getInput();
      auto gType = cast<DTensorType>(g.getType());
      Value view = AtenOp::create(
                       b, m.wait.getLoc(), TypeRange{gType}, "aten::view",
                       ValueRange{parts.getResult(i)},
                       b.getArrayAttr(
                           {operand, b.getDenseI64ArrayAttr(gType.getShape())}),
                       mesh)
                       .getResult(0);
      Value copied =
          AtenOp::create(
              b, m.wait.getLoc(), TypeRange{gType}, "aten::copy_",
              ValueRange{g, view},
              b.getArrayAttr({operand, operand, b.getBoolAttr(false)}), mesh)
              .getResult(0);
      m.wait.getResult().replaceAllUsesWith(copied);
    }
    for (const Member &m : bucket) {
      m.wait->erase();
      m.start->erase();
    }
  }

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation()->walk([&](ReduceStartOp op) {
      if (!llvm::is_contained(blocks, op->getBlock()))
        blocks.push_back(op->getBlock());
    });
    for (Block *block : blocks) {
      SmallVector<SmallVector<Member>> buckets;
      SmallVector<Member> current;
      int64_t bytes = 0;
      auto close = [&] {
        if (current.size() > 1)
          buckets.push_back(current);
        current.clear();
        bytes = 0;
      };
      for (Operation &op : *block) {
        auto start = dyn_cast<ReduceStartOp>(op);
        if (!start)
          continue;
        std::optional<Member> m = candidate(start, maxBytes);
        if (!m) {
          close();
          continue;
        }
        if (!current.empty() && !canJoin(current, *m, bytes))
          close();
        current.push_back(*m);
        bytes += m->bytes;
      }
      close();
      for (ArrayRef<Member> bucket : buckets)
        rewrite(bucket);
    }
  }
};

} // namespace
