//===- PrintMeshLayout.cpp - Report the layout of mesh values ------------===//

#include "monarch/Compiler/Analysis/MeshLayoutAnalysis.h"
#include "monarch/Compiler/Transforms/Passes.h"
#include "monarch/Dialect/Monarch/IR/MonarchTypes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"

namespace monarch {
#define GEN_PASS_DEF_PRINTMESHLAYOUT
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {
struct PrintMeshLayoutPass
    : public monarch::impl::PrintMeshLayoutBase<PrintMeshLayoutPass> {
  void runOnOperation() override {
    auto &analysis = getAnalysis<MeshLayoutAnalysis>();
    // Name roots by their order of appearance so remarks are stable.
    llvm::DenseMap<Value, unsigned> rootIds;
    for (auto [i, r] : llvm::enumerate(analysis.getRoots()))
      rootIds[r] = i;
    getOperation()->walk([&](Operation *op) {
      for (Value v : op->getResults()) {
        if (!isa<MeshType>(v.getType()))
          continue;
        InFlightDiagnostic diag = op->emitRemark("mesh layout: ");
        if (auto layout = analysis.lookup(v))
          diag << "root #" << rootIds.lookup(layout->root) << ", "
               << layout->view.layoutString();
        else
          diag << "unknown";
      }
    });
    markAllAnalysesPreserved();
  }
};
} // namespace
