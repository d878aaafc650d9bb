//===- Simulate.cpp - Predicted timeline of a program --------------------===//
//
// Replays each function on a model of the workers (one in-order queue per
// stream, events between streams for waits and borrows) with the cost
// model's durations; reports the step time, per-stream busy time and how
// much collective time is hidden under compute, and optionally writes the
// timeline as Chrome trace JSON.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Analysis/CostModel.h"
#include "monarch/Compiler/Analysis/TensorEffects.h"
#include "monarch/Compiler/Transforms/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace monarch {
#define GEN_PASS_DEF_SIMULATE
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {

struct Interval {
  std::string name;
  std::string stream;
  double start, end;
  bool comm;
};

using Spans = std::vector<std::pair<double, double>>;

Spans merged(Spans s) {
  llvm::sort(s);
  Spans out;
  for (auto [a, b] : s) {
    if (!out.empty() && a <= out.back().second)
      out.back().second = std::max(out.back().second, b);
    else
      out.push_back({a, b});
  }
  return out;
}

double length(const Spans &s) {
  double t = 0;
  for (auto [a, b] : s)
    t += b - a;
  return t;
}

double intersection(const Spans &x, const Spans &y) {
  double t = 0;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    double a = std::max(x[i].first, y[j].first);
    double b = std::min(x[i].second, y[j].second);
    if (b > a)
      t += b - a;
    (x[i].second < y[j].second) ? ++i : ++j;
  }
  return t;
}

StringRef streamOf(Operation *op) {
  for (Value v : op->getResults())
    if (auto t = dyn_cast<DTensorType>(v.getType()))
      return t.getStreamName();
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<DTensorType>(v.getType()))
      return t.getStreamName();
  return "";
}

std::string opName(Operation *op) {
  if (auto aten = dyn_cast<AtenOp>(op))
    return aten.getSchema().str();
  return op->getName().getStringRef().str();
}

/// The timeline of one function.
class Timeline {
public:
  explicit Timeline(const CostModel &model) : model(model) {}

  void run(Operation *fn) {
    fn->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (op != fn)
        step(op);
    });
  }

  double readyOf(Value v) {
    auto it = ready.find(storageRoot(v));
    return it == ready.end() ? 0 : it->second;
  }

  void step(Operation *op) {
    if (auto borrow = dyn_cast<BorrowOp>(op)) {
      auto origin = cast<DTensorType>(borrow.getInput().getType());
      created[borrow.getBorrow()] =
          std::max(free[origin.getStreamName()], readyOf(borrow.getInput()));
      return;
    }
    if (auto use = dyn_cast<BorrowFirstUseOp>(op)) {
      if (auto borrow = use.getBorrow().getDefiningOp<BorrowOp>()) {
        double &f = free[borrow.getResult().getType().getStreamName()];
        f = std::max(f, created.lookup(use.getBorrow()));
      }
      return;
    }
    if (auto use = dyn_cast<BorrowLastUseOp>(op)) {
      if (auto borrow = use.getBorrow().getDefiningOp<BorrowOp>())
        lastUse[use.getBorrow()] =
            free[borrow.getResult().getType().getStreamName()];
      return;
    }
    if (auto drop = dyn_cast<BorrowDropOp>(op)) {
      if (auto borrow = drop.getBorrow().getDefiningOp<BorrowOp>()) {
        double done = lastUse.count(drop.getBorrow())
                          ? lastUse[drop.getBorrow()]
                          : free[borrow.getResult().getType().getStreamName()];
        double &f = free[borrow.getInput().getType().getStreamName()];
        f = std::max(f, done);
      }
      return;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      double done = tokens.lookup(wait.getToken());
      double &f = free[streamOf(op)];
      f = std::max(f, done);
      ready[storageRoot(wait.getResult())] = done;
      return;
    }
    OpCost cost = model.estimate(op);
    if (cost.kind == OpCost::Kind::None)
      return;
    StringRef stream = streamOf(op);
    if (isa<ReduceStartOp, ReduceOp, ToMeshOp, ToMeshStartOp>(op))
      stream = cast<DTensorType>(op->getOperand(0).getType()).getStreamName();
    double start = free[stream];
    for (Value v : op->getOperands())
      if (isa<DTensorType>(v.getType()))
        start = std::max(start, readyOf(v));
    double end = start + cost.seconds;
    free[stream] = end;
    bool comm = cost.kind == OpCost::Kind::Collective;
    std::string name =
        comm ? stringifyCollectiveKind(cost.collective).str() : opName(op);
    intervals.push_back({name, stream.str(), start, end, comm});
    for (Value v : op->getResults())
      if (isa<DTensorType>(v.getType()))
        ready[storageRoot(v)] = end;
    if (Value w = mutatedOperand(op))
      ready[storageRoot(w)] = end;
    for (Value token : op->getResults())
      if (isa<AsyncType>(token.getType()))
        tokens[token] = end;
  }

  const CostModel &model;
  llvm::StringMap<double> free; // when each stream's queue is empty
  DenseMap<Value, double> ready, tokens, created, lastUse;
  std::vector<Interval> intervals;
};

struct SimulatePass : monarch::impl::SimulateBase<SimulatePass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<CostModel> model =
        CostModel::loadOrEmit(getOperation(), device, profile);
    if (failed(model))
      return signalPassFailure();
    std::string trace;
    llvm::raw_string_ostream os(trace);
    llvm::json::OStream json(os);
    json.objectBegin();
    json.attributeBegin("traceEvents");
    json.arrayBegin();
    int pid = 0;
    getOperation()->walk([&](FunctionOpInterface fn) {
      if (fn.isExternal())
        return;
      Timeline tl(*model);
      tl.run(fn);
      report(fn, tl);
      writeEvents(json, pid++, fn.getName(), tl);
    });
    json.arrayEnd();
    json.attributeEnd();
    json.attribute("displayTimeUnit", "ns");
    json.objectEnd();
    if (traceFile.empty())
      return;
    std::error_code ec;
    llvm::raw_fd_ostream file(traceFile, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      getOperation()->emitError("cannot write trace '")
          << traceFile << "': " << ec.message();
      return signalPassFailure();
    }
    file << trace << "\n";
  }

  static std::string us(double seconds) {
    return llvm::formatv("{0}us", llvm::format("%.3f", seconds * 1e6));
  }

  static std::string label(StringRef stream) {
    return stream.empty() ? std::string("default")
                          : ("\"" + stream + "\"").str();
  }

  void report(FunctionOpInterface fn, Timeline &tl) {
    double step = 0;
    llvm::MapVector<StringRef, double> busy;
    busy[""] = 0;
    Spans compute, comm;
    for (const Interval &iv : tl.intervals) {
      step = std::max(step, iv.end);
      busy[iv.stream] += iv.end - iv.start;
      (iv.comm ? comm : compute).push_back({iv.start, iv.end});
    }
    std::string msg = "simulated step " + us(step);
    for (auto &[stream, t] : busy)
      msg += "; stream " + label(stream) + ": busy " + us(t);
    Spans c = merged(comm);
    double commTime = length(c);
    if (commTime > 0)
      msg += llvm::formatv(
          "; overlap {0}",
          llvm::format("%.2f", intersection(c, merged(compute)) / commTime));
    else
      msg += "; overlap n/a";
    fn->emitRemark(msg);
  }

  static void writeEvents(llvm::json::OStream &json, int pid, StringRef name,
                          Timeline &tl) {
    llvm::StringMap<int> tids;
    tids[""] = 0;
    for (const Interval &iv : tl.intervals)
      tids.try_emplace(iv.stream, tids.size());
    json.object([&] {
      json.attribute("name", "process_name");
      json.attribute("ph", "M");
      json.attribute("pid", pid);
      json.attributeObject("args", [&] { json.attribute("name", name); });
    });
    for (auto &entry : tids)
      json.object([&] {
        json.attribute("name", "thread_name");
        json.attribute("ph", "M");
        json.attribute("pid", pid);
        json.attribute("tid", entry.second);
        json.attributeObject("args", [&] {
          json.attribute("name", "stream " + label(entry.first()));
        });
      });
    for (const Interval &iv : tl.intervals)
      json.object([&] {
        json.attribute("name", iv.name);
        json.attribute("cat", iv.comm ? "collective" : "compute");
        json.attribute("ph", "X");
        json.attribute("pid", pid);
        json.attribute("tid", tids[iv.stream]);
        // Microseconds, rounded to the nanosecond.
        json.attribute("ts", std::round(iv.start * 1e9) / 1e3);
        json.attribute("dur", std::round((iv.end - iv.start) * 1e9) / 1e3);
      });
  }
};

} // namespace
