//===- ScheduleOverlap.cpp - Overlap collectives with compute ------------===//
//
// List scheduling of each block holding a monarch.reduce_start: starts as
// early as their inputs allow, waits as late as their first use allows,
// independent compute in between, under the dependencies that keep the
// program's meaning and the cost model's predicted completion times.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Analysis/CostModel.h"
#include "monarch/Compiler/Analysis/OpDependences.h"
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
    for (Operation *op : schedulableOps(block)) {
      index[op] = nodes.size();
      nodes.push_back({op});
    }
    buildEdges();
    SmallVector<Operation *> order = schedule();
    if (order.size() != nodes.size())
      return; // A cycle cannot happen with edges from program order only.
    applyOrder(block, order);
  }

private:
  void addEdge(unsigned from, unsigned to) {
    if (from == to)
      return;
    nodes[from].succs.push_back(to);
    ++nodes[to].unmet;
  }

  void buildEdges() {
    SmallVector<Operation *> ops;
    for (unsigned i = 0, e = nodes.size(); i < e; ++i) {
      nodes[i].cost = model.estimate(nodes[i].op).seconds;
      ops.push_back(nodes[i].op);
    }
    forEachDependence(block, ops, {},
                      [&](unsigned from, unsigned to) { addEdge(from, to); });
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
