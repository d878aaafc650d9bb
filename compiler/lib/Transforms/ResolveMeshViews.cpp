//===- ResolveMeshViews.cpp - Mesh views as one view of their root -------===//

#include "monarch/Compiler/Transforms/Passes.h"
#include "monarch/Dialect/Monarch/IR/MeshLayout.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace monarch {
#define GEN_PASS_DEF_RESOLVEMESHVIEWS
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {
/// Replaces a view op that is not already `monarch.view %root` by one.
struct ResolveView : public RewritePattern {
  ResolveView(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isMeshViewOp(op))
      return failure();
    Value source = op->getOperand(0);
    Operation *def = source.getDefiningOp();
    if (isa<ViewOp>(op) && !(def && isMeshViewOp(def)))
      return failure();
    auto layout = resolveMeshLayout(op->getResult(0));
    if (!layout)
      return failure();
    auto view =
        ViewOp::create(rewriter, op->getLoc(), layout->root, layout->view);
    if (view.getType() != op->getResult(0).getType()) {
      rewriter.eraseOp(view);
      return failure();
    }
    rewriter.replaceOp(op, view.getResult());
    return success();
  }
};

struct ResolveMeshViewsPass
    : public monarch::impl::ResolveMeshViewsBase<ResolveMeshViewsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ResolveView>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
