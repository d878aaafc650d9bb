//===- ScheduleOverlap.cpp - Overlap collectives with compute ------------===//
//
// List scheduling of each block holding a monarch.reduce_start: starts as
// early as their inputs allow, waits as late as their first use allows,
// independent compute in between, under the dependencies that keep the
// program's meaning and the cost model's predicted completion times.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Analysis/CostModel.h"
#include "monarch/Compiler/Analysis/TensorEffects.h"
#include "monarch/Compiler/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

namespace monarch {
#define GEN_PASS_DEF_SCHEDULEOVERLAP
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

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
          RankOp, StreamCreateOp>(op))
    return Order::None;
  // Everything else (borrow events, func.call, ...) unless known pure.
  return isMemoryEffectFree(op) ? Order::None : Order::Barrier;
}

/// The communicator a collective is issued on: its mesh and reduced dims.
std::string communicatorKey(Operation *op) {
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
  else if (isa<ToMeshOp, ToMeshStartOp>(op))
    os << "to_mesh";
  return key;
}

struct Node {
  Operation *op;
  SmallVector<unsigned> succs;
  unsigned unmet = 0;
  double cost = 0;
  double done = 0; // predicted completion (collectives)
};

class BlockScheduler {
public:
  BlockScheduler(Block &block, const CostModel &model, unsigned maxInFlight)
      : block(block), model(model), maxInFlight(maxInFlight) {}

  void run() {
    Operation *terminator = nullptr;
    for (Operation &op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>() && &op == &block.back()) {
        terminator = &op;
        break;
      }
      index[&op] = nodes.size();
      nodes.push_back({&op});
    }
    buildEdges();
    SmallVector<Operation *> order = schedule();
    if (order.size() != nodes.size())
      return; // A cycle cannot happen with edges from program order only.
    for (Operation *op : order)
      op->moveBefore(&block, block.end());
    if (terminator)
      terminator->moveBefore(&block, block.end());
  }

private:
  void addEdge(unsigned from, unsigned to) {
    if (from == to)
      return;
    nodes[from].succs.push_back(to);
    ++nodes[to].unmet;
  }

  void buildEdges() {
    DenseMap<Value, unsigned> lastWrite;
    DenseMap<Value, SmallVector<unsigned>> readsSinceWrite;
    llvm::StringMap<unsigned> lastCollective;
    std::optional<unsigned> lastHost, lastBarrier;
    for (unsigned i = 0, e = nodes.size(); i < e; ++i) {
      Operation *op = nodes[i].op;
      nodes[i].cost = model.estimate(op).seconds;
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
      std::string key = communicatorKey(op);
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

  SmallVector<Operation *> schedule() {
    SmallVector<Operation *> order;
    std::set<unsigned> ready;
    for (unsigned i = 0; i < nodes.size(); ++i)
      if (nodes[i].unmet == 0)
        ready.insert(i);
    double now = 0, commFree = 0;
    unsigned inFlight = 0;
    auto isStart = [&](unsigned i) {
      return isa<ReduceStartOp, ToMeshStartOp>(nodes[i].op);
    };
    auto isWait = [&](unsigned i) { return isa<WaitOp>(nodes[i].op); };
    auto waitDone = [&](unsigned i) {
      auto start = cast<WaitOp>(nodes[i].op).getToken().getDefiningOp();
      auto it = start ? index.find(start) : index.end();
      return it == index.end() ? 0.0 : nodes[it->second].done;
    };
    while (!ready.empty()) {
      std::optional<unsigned> pick, start, other, wait;
      for (unsigned i : ready) {
        if (isStart(i) && !start)
          start = i;
        else if (isWait(i)) {
          if (!wait || waitDone(i) < waitDone(*wait))
            wait = i;
        } else if (!isStart(i) && !other)
          other = i;
      }
      bool capped = maxInFlight && inFlight >= maxInFlight;
      if (start && !capped)
        pick = start; // Raise starts: issue as soon as the input is ready.
      else if (start && wait && waitDone(*wait) <= now)
        pick = wait; // Make room for the next start without stalling.
      else if (other)
        pick = other; // Fill the gap with compute, in program order.
      else if (wait)
        pick = wait; // Sink waits: only when nothing else can run.
      else
        pick = start; // Over the cap rather than deadlock.
      unsigned i = *pick;
      ready.erase(i);
      Node &n = nodes[i];
      if (isStart(i)) {
        n.done = std::max(now, commFree) + n.cost;
        commFree = n.done;
        ++inFlight;
      } else if (isWait(i)) {
        now = std::max(now, waitDone(i));
        if (inFlight)
          --inFlight;
      } else {
        now += n.cost;
      }
      order.push_back(n.op);
      for (unsigned s : n.succs)
        if (--nodes[s].unmet == 0)
          ready.insert(s);
    }
    return order;
  }

  Block &block;
  const CostModel &model;
  unsigned maxInFlight;
  SmallVector<Node> nodes;
  DenseMap<Operation *, unsigned> index;
};

struct ScheduleOverlapPass
    : monarch::impl::ScheduleOverlapBase<ScheduleOverlapPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<CostModel> model =
        CostModel::loadOrEmit(getOperation(), device, profile);
    if (failed(model))
      return signalPassFailure();
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Operation *op) {
      Block *b = op->getBlock();
      if (isa<ReduceStartOp, ToMeshStartOp>(op) &&
          !llvm::is_contained(blocks, b))
        blocks.push_back(b);
    });
    for (Block *b : blocks)
      BlockScheduler(*b, *model, maxInFlight).run();
  }
};

} // namespace
