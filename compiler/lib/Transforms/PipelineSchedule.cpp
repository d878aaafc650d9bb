//===- PipelineSchedule.cpp - GPipe / 1F1B order of pipeline stages -------===//
//
// Reorders a traced pipeline-parallel program so that every stage runs its
// microbatches' forward and backward work in the order of a pipeline schedule
// (GPipe or 1F1B). Each worker executes the instructions of its own mesh in
// program order, so the order of the ops of one stage mesh *is* that stage's
// schedule; the pass emits one global order (a topological order of the
// dependencies), which keeps every blocking transfer matched on both sides.
//
// What is inferred from the IR (docs/passes.md#pipeline-scheduling):
//  - stages: the meshes joined by `monarch.to_mesh`; the first transfer
//    between two stages gives the forward direction, and the stages must form
//    one chain (stage 0 -> 1 -> ... -> P-1);
//  - units: the k-th forward (backward) transfer across a boundary carries
//    microbatch k. An op belongs to the unit of the first outgoing transfer
//    whose input it helps compute (same stage, through SSA), else to the unit
//    of the latest incoming transfer it depends on; other ops are unanchored;
//  - steps: fetches (`fetch_shard`/`inspect`) split the program into regions
//    that are never mixed; microbatches are numbered from 0 in each region.
//
// The stage s of P with microbatch j gets a slot: GPipe F_j = j,
// B_j = BIG + j; 1F1B (warm-up w = P - s) F_j = j for j < w, else
// 2(j - w) + w + 1, B_j = w + 2j. Slots never decrease along a dependency
// between units, so a list scheduler picking the ready op of smallest
// (region, slot, program index) gives each stage exactly its slot order; a
// transfer, which both stages execute, goes after the other ops of its slot
// so that it does not cut the receiving stage's unit of that slot in two.
// Unanchored ops get slot -1 (as early as their dependencies allow, in
// program order). Dependencies kept: SSA uses, storage (in-place writes and
// their aliases, views included), the order of collectives of one
// communicator (reduce), the order of fetches and RNG ops, and unknown side
// effects as barriers.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Analysis/OpDependences.h"
#include "monarch/Compiler/Analysis/TensorEffects.h"
#include "monarch/Compiler/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>
#include <tuple>

namespace monarch {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {

constexpr int64_t kBig = int64_t(1) << 40;

enum class Dir { F, B };

/// A transfer between two pipeline stages.
struct Transfer {
  unsigned index; // program index of the to_mesh
  int from, to;   // stage numbers
  Dir dir;
  int64_t k; // microbatch number in its region
};

/// Which unit an op belongs to.
struct Unit {
  int stage = -1; // -1: unanchored
  Dir dir = Dir::F;
  int64_t j = 0;
};

class PipelineScheduler {
public:
  PipelineScheduler(Block &block, bool oneFOneB)
      : block(block), oneFOneB(oneFOneB) {}

  /// Returns a message when the block is not a pipeline (left unchanged).
  std::string run() {
    ops = schedulableOps(block);
    for (unsigned i = 0; i < ops.size(); ++i)
      index[ops[i]] = i;
    if (std::string why = findStages(); !why.empty())
      return why;
    assignUnits();
    buildEdges();
    SmallVector<Operation *> order = schedule();
    if (order.size() != ops.size())
      return "dependency cycle (internal error)";
    applyOrder(block, order);
    return "";
  }

  unsigned numStages() const { return stageMeshes.size(); }
  unsigned numTransfers() const { return transfers.size(); }

private:
  // -- stages --------------------------------------------------------------

  /// The mesh value an op runs on (its mesh operand, or the mesh of the
  /// tensor it reads); null when none.
  Value meshOf(Operation *op) {
    if (auto aten = dyn_cast<AtenOp>(op))
      return aten.getMesh();
    if (auto rank = dyn_cast<RankOp>(op))
      return rank.getMesh();
    if (auto index = dyn_cast<IndexTensorOp>(op))
      return index.getMesh();
    for (Value v : op->getOperands())
      if (isa<DTensorType>(v.getType()))
        return meshOfValue(v);
    return {};
  }

  Value meshOfValue(Value v) {
    if (auto it = valueMesh.find(v); it != valueMesh.end())
      return it->second;
    Value m;
    if (Operation *def = v.getDefiningOp()) {
      if (auto t = dyn_cast<ToMeshOp>(def))
        m = t.getDest();
      else
        m = meshOf(def);
    }
    valueMesh[v] = m;
    return m;
  }

  int stageOf(Operation *op) {
    Value m = meshOf(op);
    auto it = m ? stageIndex.find(m) : stageIndex.end();
    return it == stageIndex.end() ? -1 : it->second;
  }

  std::string findStages() {
    // Forward edges between meshes, in order of first transfer.
    SmallVector<std::pair<Value, Value>> edges;
    auto known = [&](Value a, Value b) {
      for (auto &[x, y] : edges)
        if ((x == a && y == b) || (x == b && y == a))
          return true;
      return false;
    };
    for (Operation *op : ops) {
      auto t = dyn_cast<ToMeshOp>(op);
      if (!t)
        continue;
      Value a = meshOfValue(t.getInput()), b = t.getDest();
      if (!a || !b || a == b)
        continue;
      if (!known(a, b))
        edges.push_back({a, b});
    }
    if (edges.empty())
      return "no to_mesh between two meshes: not a pipeline";
    DenseMap<Value, Value> next, prev;
    for (auto &[a, b] : edges) {
      if (next.count(a) || prev.count(b))
        return "the stage meshes do not form one chain";
      next[a] = b;
      prev[b] = a;
    }
    Value first;
    for (auto &[a, b] : edges)
      if (!prev.count(a)) {
        if (first && first != a)
          return "the stage meshes do not form one chain";
        first = a;
      }
    if (!first)
      return "the stage meshes form a cycle";
    for (Value m = first; m; m = next.lookup(m)) {
      stageIndex[m] = stageMeshes.size();
      stageMeshes.push_back(m);
      if (stageMeshes.size() > edges.size() + 1)
        return "the stage meshes form a cycle";
    }
    if (stageMeshes.size() != edges.size() + 1)
      return "the stage meshes do not form one chain";
    return "";
  }

  // -- units ---------------------------------------------------------------

  bool isFetch(Operation *op) { return isa<FetchShardOp, InspectOp>(op); }

  void assignUnits() {
    unsigned n = ops.size();
    region.assign(n, 0);
    units.assign(n, Unit());
    int64_t r = 0;
    for (unsigned i = 0; i < n; ++i) {
      region[i] = r;
      if (isFetch(ops[i]))
        ++r;
    }
    // Transfers, numbered per (boundary, direction, region).
    std::map<std::tuple<int, int, int64_t>, int64_t> counter;
    DenseMap<unsigned, unsigned> transferAt; // op index -> transfers index
    for (unsigned i = 0; i < n; ++i) {
      auto t = dyn_cast<ToMeshOp>(ops[i]);
      if (!t)
        continue;
      int a = stageOf(ops[i]);
      auto it = stageIndex.find(t.getDest());
      if (a < 0 || it == stageIndex.end() || a == int(it->second))
        continue;
      int b = it->second;
      Dir d = b == a + 1 ? Dir::F : Dir::B;
      int64_t k = counter[{std::min(a, b), int(d), region[i]}]++;
      transferAt[i] = transfers.size();
      transfers.push_back({i, a, b, d, k});
    }
    // 1. Producer cones: what each outgoing transfer needs, on its stage.
    for (Transfer &t : transfers) {
      Unit u{t.from, t.dir, t.k};
      units[t.index] = u;
      SmallVector<Operation *> work;
      auto push = [&](Value v) {
        if (Operation *def = v.getDefiningOp()) {
          auto it = index.find(block.findAncestorOpInBlock(*def));
          if (it == index.end() || units[it->second].stage >= 0 ||
              region[it->second] != region[t.index] ||
              isa<ToMeshOp>(ops[it->second]) ||
              stageOf(ops[it->second]) != t.from)
            return;
          units[it->second] = u;
          work.push_back(ops[it->second]);
        }
      };
      push(cast<ToMeshOp>(ops[t.index]).getInput());
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        op->walk([&](Operation *nested) {
          for (Value v : nested->getOperands())
            push(v);
        });
      }
    }
    // 2. The rest: the latest incoming transfer it depends on (same stage).
    std::vector<int> latestIn(n, -1); // transfers index
    for (unsigned i = 0; i < n; ++i) {
      Operation *op = ops[i];
      int stage = stageOf(op);
      int best = -1;
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (!def)
            continue;
          auto it = index.find(block.findAncestorOpInBlock(*def));
          if (it == index.end())
            continue;
          unsigned d = it->second;
          int cand = -1;
          if (auto ti = transferAt.find(d);
              ti != transferAt.end() && transfers[ti->second].to == stage)
            cand = ti->second;
          else if (stageOf(ops[d]) == stage && !transferAt.count(d))
            cand = latestIn[d];
          if (cand >= 0 &&
              (best < 0 || transfers[cand].index > transfers[best].index))
            best = cand;
        }
      });
      latestIn[i] = best;
      if (units[i].stage < 0 && best >= 0 && stage >= 0 &&
          region[transfers[best].index] == region[i]) {
        const Transfer &t = transfers[best];
        units[i] = Unit{stage, t.dir, t.k};
      }
    }
  }

  int64_t slot(const Unit &u) const {
    if (u.stage < 0)
      return -1;
    if (!oneFOneB)
      return u.dir == Dir::F ? u.j : kBig + u.j;
    int64_t w = int64_t(stageMeshes.size()) - u.stage;
    if (u.dir == Dir::B)
      return w + 2 * u.j;
    return u.j < w ? u.j : 2 * (u.j - w) + w + 1;
  }

  // -- dependencies ----------------------------------------------------------

  void addEdge(unsigned from, unsigned to) {
    if (from == to)
      return;
    succs[from].push_back(to);
    ++unmet[to];
  }

  void buildEdges() {
    unsigned n = ops.size();
    succs.assign(n, {});
    unmet.assign(n, 0);
    // to_mesh transfers may be reordered: every rank follows the one global
    // order this pass emits, so both sides of each transfer still match.
    DependenceOptions options;
    options.orderTransfers = false;
    forEachDependence(block, ops, options,
                      [&](unsigned from, unsigned to) { addEdge(from, to); });
  }

  // -- list scheduling --------------------------------------------------------

  SmallVector<Operation *> schedule() {
    using Key = std::tuple<int64_t, int64_t, int, unsigned>;
    std::set<Key> ready;
    auto key = [&](unsigned i) -> Key {
      // A fetch closes its region: after everything else of the region.
      int64_t s = isFetch(ops[i]) ? 2 * kBig : slot(units[i]);
      // A transfer runs on both stages: after the receiving stage's ops of
      // the same slot (its unit in flight), not in the middle of them.
      int transfer = isa<ToMeshOp>(ops[i]) ? 1 : 0;
      return {region[i], s, transfer, i};
    };
    for (unsigned i = 0; i < ops.size(); ++i)
      if (unmet[i] == 0)
        ready.insert(key(i));
    SmallVector<Operation *> order;
    while (!ready.empty()) {
      unsigned i = std::get<3>(*ready.begin());
      ready.erase(ready.begin());
      order.push_back(ops[i]);
      for (unsigned s : succs[i])
        if (--unmet[s] == 0)
          ready.insert(key(s));
    }
    return order;
  }

  Block &block;
  bool oneFOneB;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> index;
  DenseMap<Value, Value> valueMesh;
  DenseMap<Value, unsigned> stageIndex;
  SmallVector<Value> stageMeshes;
  SmallVector<Transfer> transfers;
  std::vector<int64_t> region;
  std::vector<Unit> units;
  std::vector<SmallVector<unsigned>> succs;
  std::vector<unsigned> unmet;
};

struct PipelineSchedulePass
    : monarch::impl::PipelineScheduleBase<PipelineSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    bool oneFOneB;
    if (schedule == "1f1b")
      oneFOneB = true;
    else if (schedule == "gpipe")
      oneFOneB = false;
    else {
      getOperation()->emitError()
          << "monarch-pipeline-schedule: unknown schedule '" << schedule
          << "' (expected gpipe or 1f1b)";
      return signalPassFailure();
    }
    SmallVector<Block *> blocks;
    getOperation()->walk([&](ToMeshOp op) {
      Block *b = op->getBlock();
      if (!llvm::is_contained(blocks, b))
        blocks.push_back(b);
    });
    for (Block *b : blocks) {
      PipelineScheduler s(*b, oneFOneB);
      std::string why = s.run();
      Operation *parent = b->getParentOp();
      if (!why.empty()) {
        if (report)
          parent->emitRemark() << "pipeline schedule: left unchanged: " << why;
        continue;
      }
      if (report)
        parent->emitRemark()
            << "pipeline schedule " << schedule << ": " << s.numStages()
            << " stages, " << s.numTransfers() << " transfers";
    }
  }
};

} // namespace
