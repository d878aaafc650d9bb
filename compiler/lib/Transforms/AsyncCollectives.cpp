//===- AsyncCollectives.cpp - reduce/to_mesh -> *_start + wait ----------===//

#include "monarch/Compiler/Transforms/Passes.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace monarch {
#define GEN_PASS_DEF_ASYNCCOLLECTIVES
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {

struct SplitReduce : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceOp op,
                                PatternRewriter &rewriter) const override {
    auto tokenType = AsyncType::get(getContext(), op.getResult().getType());
    auto start = ReduceStartOp::create(
        rewriter, op.getLoc(), tokenType, op.getInput(), op.getDims(),
        op.getReductionAttr(), op.getScatterAttr(), op.getInplaceAttr(),
        op.getOut());
    auto wait = WaitOp::create(rewriter, op.getLoc(), op.getResult().getType(),
                               start.getToken());
    rewriter.replaceOp(op, wait.getResult());
    return success();
  }
};

struct SplitToMesh : OpRewritePattern<ToMeshOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ToMeshOp op,
                                PatternRewriter &rewriter) const override {
    auto tokenType = AsyncType::get(getContext(), op.getResult().getType());
    auto start = ToMeshStartOp::create(rewriter, op.getLoc(), tokenType,
                                       op.getInput(), op.getDest());
    auto wait = WaitOp::create(rewriter, op.getLoc(), op.getResult().getType(),
                               start.getToken());
    rewriter.replaceOp(op, wait.getResult());
    return success();
  }
};

struct AsyncCollectivesPass
    : monarch::impl::AsyncCollectivesBase<AsyncCollectivesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitReduce, SplitToMesh>(&getContext());
    // Only the matched reduces change: no folding or region simplification
    // of the rest of the program.
    GreedyRewriteConfig config;
    config.enableFolding(false).setRegionSimplificationLevel(
        GreedySimplifyRegionLevel::Disabled);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
