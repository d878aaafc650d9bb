//===- MeshLayoutAnalysis.h - Static layout of every mesh value -*- C++ -*-===//
//
// Maps every !monarch.mesh value under an op to its root mesh and strided
// view (offset, sizes, strides over the root's ranks), computed once with
// monarch::resolveMeshLayout. Usable as an MLIR analysis
// (getAnalysis<MeshLayoutAnalysis>()) by passes such as the plan lowering.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_ANALYSIS_MESHLAYOUTANALYSIS_H
#define MONARCH_COMPILER_ANALYSIS_MESHLAYOUTANALYSIS_H

#include "monarch/Dialect/Monarch/IR/MeshLayout.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace monarch {

class MeshLayoutAnalysis {
public:
  explicit MeshLayoutAnalysis(mlir::Operation *root);

  /// The layout of a mesh value, or nullopt if it is not statically known
  /// (an invalid view on the way to its root).
  std::optional<MeshLayout> lookup(mlir::Value mesh) const;

  /// The roots seen, in program order (spawn_procs results first appear
  /// where they are defined; block arguments where first used).
  llvm::ArrayRef<mlir::Value> getRoots() const { return roots; }

private:
  llvm::DenseMap<mlir::Value, MeshLayout> layouts;
  llvm::SmallVector<mlir::Value> roots;
};

} // namespace monarch

#endif // MONARCH_COMPILER_ANALYSIS_MESHLAYOUTANALYSIS_H
