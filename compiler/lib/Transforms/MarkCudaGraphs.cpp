//===- MarkCudaGraphs.cpp - Mark recordings as CUDA-graph candidates ------===//
//
// The compile-time half of CUDA graphs (docs/passes.md,
// monarch-mark-cuda-graphs): which recordings a worker may capture. The
// lowering carries the mark into the plan (Recording.cuda_graph); the
// worker decides what of a marked body it can capture, once, when the
// recording is defined (runtime/tensor/lib/cuda/GraphSegments.h), so the
// rule for what a graph can hold has one home, in the runtime.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Transforms/Passes.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

namespace monarch {
#define GEN_PASS_DEF_MARKCUDAGRAPHS
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {

constexpr llvm::StringLiteral kMark = "monarch.cuda_graph";

/// ATen calls directly in `block` (a nested loop is a recording of its own).
unsigned atenCalls(Block &block) {
  unsigned n = 0;
  for (Operation &op : block)
    n += isa<AtenOp>(op);
  return n;
}

struct MarkCudaGraphsPass
    : public monarch::impl::MarkCudaGraphsBase<MarkCudaGraphsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    UnitAttr unit = UnitAttr::get(&getContext());
    module.walk([&](scf::ForOp loop) {
      if (atenCalls(*loop.getBody()) >= minOps)
        loop->setAttr(kMark, unit);
    });
    // Functions are recordings where they are called.
    SymbolTable symbols(module);
    module.walk([&](func::CallOp call) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (callee && !callee.isExternal() &&
          atenCalls(callee.getBody().front()) >= minOps)
        callee->setAttr(kMark, unit);
    });
  }
};

} // namespace
