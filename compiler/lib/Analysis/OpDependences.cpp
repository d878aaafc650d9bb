//===- OpDependences.cpp - Ordering constraints between a block's ops -----===//

#include "monarch/Compiler/Analysis/OpDependences.h"

#include "monarch/Compiler/Analysis/TensorEffects.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace mlir;

namespace monarch {
namespace {

enum class Order { None, Host, Barrier };

/// Ops whose relative order must be kept although they share no data:
/// host-visible effects (fetches, endpoint calls, user functions, RNG), and
/// unknown ops, which are barriers.
Order orderOf(Operation *op) {
  if (isa<FetchShardOp, InspectOp, EndpointCallOp, CallFunctionOp,
          SpawnActorOp>(op))
    return Order::Host;
  if (auto aten = dyn_cast<AtenOp>(op)) {
    StringRef s = aten.getSchema();
    bool rng = s.contains("rand") || s.contains("dropout") ||
               s.contains("seed") || s.contains("normal") ||
               s.contains("uniform") || s.contains("bernoulli") ||
               s.contains("multinomial");
    bool effectOnly = aten.getNumResults() == 0 && !mutatedOperand(op);
    return rng || effectOnly ? Order::Host : Order::None;
  }
  // Their effects are modelled by the storage and communicator edges.
  if (isa<ReduceOp, ReduceStartOp, WaitOp, ToMeshOp, ToMeshStartOp, SliceMeshOp,
          RankOp, IndexTensorOp, StreamCreateOp>(op))
    return Order::None;
  // Everything else (borrow events, func.call, ...) unless known pure.
  return isMemoryEffectFree(op) ? Order::None : Order::Barrier;
}

} // namespace

std::string communicatorKey(Operation *op, const DependenceOptions &options) {
  std::string key;
  llvm::raw_string_ostream os(key);
  auto print = [&](auto r) {
    auto in = cast<DTensorType>(r.getInput().getType());
    os << in.getMesh() << '|' << in.getStreamName();
    SmallVector<StringRef> dims = r.getEffectiveDims();
    llvm::sort(dims);
    for (StringRef d : dims)
      os << '|' << d;
  };
  if (auto r = dyn_cast<ReduceOp>(op))
    print(r);
  else if (auto r = dyn_cast<ReduceStartOp>(op))
    print(r);
  else if (options.orderTransfers && isa<ToMeshOp, ToMeshStartOp>(op))
    os << "to_mesh";
  return key;
}

SmallVector<Operation *> schedulableOps(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    if (!(op.hasTrait<OpTrait::IsTerminator>() && &op == &block.back()))
      ops.push_back(&op);
  return ops;
}

void applyOrder(Block &block, ArrayRef<Operation *> order) {
  Operation *terminator =
      !block.empty() && block.back().hasTrait<OpTrait::IsTerminator>()
          ? &block.back()
          : nullptr;
  for (Operation *op : order)
    op->moveBefore(&block, block.end());
  if (terminator)
    terminator->moveBefore(&block, block.end());
}

void forEachDependence(Block &block, ArrayRef<Operation *> ops,
                       const DependenceOptions &options,
                       llvm::function_ref<void(unsigned, unsigned)> edge) {
  DenseMap<Operation *, unsigned> index;
  for (unsigned i = 0; i < ops.size(); ++i)
    index[ops[i]] = i;
  auto addEdge = [&](unsigned from, unsigned to) {
    if (from != to)
      edge(from, to);
  };
  DenseMap<Value, unsigned> lastWrite;
  DenseMap<Value, SmallVector<unsigned>> readsSinceWrite;
  llvm::StringMap<unsigned> lastCollective;
  std::optional<unsigned> lastHost, lastBarrier;
  for (unsigned i = 0, e = ops.size(); i < e; ++i) {
    Operation *op = ops[i];
    // SSA uses, also from nested regions.
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def)
          continue;
        Operation *anc = block.findAncestorOpInBlock(*def);
        auto it = anc ? index.find(anc) : index.end();
        if (it != index.end() && it->second < i)
          addEdge(it->second, i);
      }
    });
    // Storage: read-after-write, write-after-read, write-after-write.
    Value written = mutatedOperand(op);
    Value writtenRoot = written ? storageRoot(written) : Value();
    SmallVector<Value> reads(op->getOperands());
    // A to_mesh copy reads its source until the wait.
    if (auto wait = dyn_cast<WaitOp>(op))
      if (auto copy = wait.getToken().getDefiningOp<ToMeshStartOp>())
        reads.push_back(copy.getInput());
    for (Value v : reads) {
      if (!isa<DTensorType>(v.getType()))
        continue;
      Value root = storageRoot(v);
      if (auto it = lastWrite.find(root); it != lastWrite.end())
        addEdge(it->second, i);
      if (root != writtenRoot)
        readsSinceWrite[root].push_back(i);
    }
    if (writtenRoot) {
      for (unsigned r : readsSinceWrite[writtenRoot])
        addEdge(r, i);
      readsSinceWrite[writtenRoot].clear();
      if (auto it = lastWrite.find(writtenRoot); it != lastWrite.end())
        addEdge(it->second, i);
      lastWrite[writtenRoot] = i;
    }
    // One communicator's collectives stay in program order.
    std::string key = communicatorKey(op, options);
    if (!key.empty()) {
      auto [it, inserted] = lastCollective.try_emplace(key, i);
      if (!inserted) {
        addEdge(it->second, i);
        it->second = i;
      }
    }
    Order order = orderOf(op);
    if (order == Order::Host) {
      if (lastHost)
        addEdge(*lastHost, i);
      lastHost = i;
    }
    if (order == Order::Barrier) {
      for (unsigned j = lastBarrier ? *lastBarrier : 0; j < i; ++j)
        addEdge(j, i);
      lastBarrier = i;
    } else if (lastBarrier) {
      addEdge(*lastBarrier, i);
    }
  }
}

} // namespace monarch
