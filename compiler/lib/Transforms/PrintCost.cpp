//===- PrintCost.cpp - Report the cost model per op (test pass) ----------===//

#include "monarch/Compiler/Analysis/CostModel.h"
#include "monarch/Compiler/Transforms/Passes.h"

#include "llvm/Support/FormatVariadic.h"

namespace monarch {
#define GEN_PASS_DEF_PRINTCOST
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {

struct PrintCostPass : monarch::impl::PrintCostBase<PrintCostPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<CostModel> model =
        CostModel::loadOrEmit(getOperation(), device, profile);
    if (failed(model))
      return signalPassFailure();
    getOperation()->walk([&](Operation *op) {
      OpCost c = model->estimate(op);
      double us = c.seconds * 1e6;
      if (c.kind == OpCost::Kind::Compute)
        op->emitRemark(llvm::formatv("compute: flops={0} bytes={1} time={2}us",
                                     uint64_t(c.flops), uint64_t(c.bytes),
                                     llvm::format("%.3f", us)));
      else if (c.kind == OpCost::Kind::Collective)
        op->emitRemark(llvm::formatv("{0} over {1} ranks: bytes={2} time={3}us",
                                     stringifyCollectiveKind(c.collective),
                                     c.groupSize, uint64_t(c.bytes),
                                     llvm::format("%.3f", us)));
    });
  }
};

} // namespace
