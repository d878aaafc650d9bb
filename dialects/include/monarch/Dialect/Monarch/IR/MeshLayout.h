//===- MeshLayout.h - Static layout of mesh values --------------*- C++ -*-===//
//
// Every value of type !monarch.mesh is a view of a root mesh: the result of
// monarch.spawn_procs, or a value the IR does not look through (a block
// argument, the result of a call). resolveMeshLayout walks rename / split /
// slice / flatten / view ops back to that root and composes them into one
// strided MeshView (offset, sizes, strides over the root's ranks).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_DIALECT_MONARCH_IR_MESHLAYOUT_H
#define MONARCH_DIALECT_MONARCH_IR_MESHLAYOUT_H

#include "mlir/IR/Value.h"
#include "monarch/mesh/MeshView.h"

#include <optional>

namespace monarch {

struct MeshLayout {
  /// The root mesh value (never a view op's result).
  mlir::Value root;
  /// The view of the root's ranks.
  mesh::MeshView view;
};

/// True for ops whose result is a view of their mesh operand.
bool isMeshViewOp(mlir::Operation *op);

/// The layout of `mesh`, or nullopt when some view op on the way to the root
/// is invalid (its verifier reports why).
std::optional<MeshLayout> resolveMeshLayout(mlir::Value mesh);

/// The mesh value an op producing a distributed tensor runs on, if the op
/// names one (aten, call_function, rank, to_mesh).
mlir::Value getDefiningMesh(mlir::Value tensor);

} // namespace monarch

#endif // MONARCH_DIALECT_MONARCH_IR_MESHLAYOUT_H
