//===- MeshLayoutAnalysis.cpp - Static layout of every mesh value --------===//

#include "monarch/Compiler/Analysis/MeshLayoutAnalysis.h"
#include "monarch/Dialect/Monarch/IR/MonarchTypes.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace monarch;

MeshLayoutAnalysis::MeshLayoutAnalysis(Operation *root) {
  llvm::SmallPtrSet<Value, 8> seenRoots;
  auto visit = [&](Value v) {
    if (!isa<MeshType>(v.getType()) || layouts.count(v))
      return;
    if (auto layout = resolveMeshLayout(v)) {
      if (seenRoots.insert(layout->root).second)
        roots.push_back(layout->root);
      layouts.try_emplace(v, std::move(*layout));
    }
  };
  root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    for (Value v : op->getOperands())
      visit(v);
    for (Value v : op->getResults())
      visit(v);
  });
}

std::optional<MeshLayout> MeshLayoutAnalysis::lookup(Value mesh) const {
  auto it = layouts.find(mesh);
  if (it == layouts.end())
    return std::nullopt;
  return it->second;
}
