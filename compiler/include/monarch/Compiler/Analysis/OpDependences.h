//===- OpDependences.h - Ordering constraints between a block's ops -*- C++
//-*-===//
//
// What a scheduler that reorders the ops of one block must keep (shared by
// --monarch-schedule-overlap and --monarch-pipeline-schedule):
//   - SSA uses, also from ops nested in regions;
//   - storage order (TensorEffects.h): read-after-write, write-after-read and
//     write-after-write on the same storage, through in-place results,
//     borrows, in-place collectives and views; a to_mesh copy reads its
//     source until its wait;
//   - program order of the collectives of one communicator (every rank must
//     issue them in the same order) and, optionally, of to_mesh transfers;
//   - program order of host-visible effects (fetches, endpoint calls, user
//     functions, RNG);
//   - ops with unknown effects are barriers nothing crosses.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_ANALYSIS_OPDEPENDENCES_H
#define MONARCH_COMPILER_ANALYSIS_OPDEPENDENCES_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace monarch {

struct DependenceOptions {
  /// Keep to_mesh transfers in program order. The pipeline scheduler orders
  /// transfers itself (every rank follows its one global order).
  bool orderTransfers = true;
};

/// The communicator a collective is issued on ("" for other ops): its mesh,
/// stream and reduced dims; "to_mesh" for transfers when they are ordered.
std::string communicatorKey(mlir::Operation *op,
                            const DependenceOptions &options = {});

/// The ops of `block` a scheduler reorders: all of them in program order,
/// the terminator excluded.
llvm::SmallVector<mlir::Operation *> schedulableOps(mlir::Block &block);

/// Puts `order` (a permutation of schedulableOps(block)) into the block in
/// that order, the terminator last.
void applyOrder(mlir::Block &block, llvm::ArrayRef<mlir::Operation *> order);

/// Calls `edge(from, to)`, `from < to` being positions in `ops` (the ops of
/// `block` in program order, terminator excluded), once per constraint
/// (duplicates possible).
void forEachDependence(mlir::Block &block,
                       llvm::ArrayRef<mlir::Operation *> ops,
                       const DependenceOptions &options,
                       llvm::function_ref<void(unsigned, unsigned)> edge);

} // namespace monarch

#endif // MONARCH_COMPILER_ANALYSIS_OPDEPENDENCES_H
