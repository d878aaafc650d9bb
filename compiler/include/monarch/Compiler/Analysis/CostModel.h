//===- CostModel.h - Predicted cost of monarch ops --------------*- C++ -*-===//
//
// A roofline cost for ATen ops (FLOPs and bytes from the local shapes) and
// an alpha-beta cost for collectives (by kind and group size, with
// per-mesh-dim overrides), with defaults per device kind and a JSON profile
// format measured on a machine. Used by --monarch-schedule-overlap and
// --monarch-simulate; --monarch-print-cost shows it per op.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_ANALYSIS_COSTMODEL_H
#define MONARCH_COMPILER_ANALYSIS_COSTMODEL_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace monarch {

/// The collectives the cost model knows (DESIGN.md §6.2 plus point to point
/// copies of to_mesh and fetches).
enum class CollectiveKind {
  AllReduce,
  ReduceScatter,
  AllGather,
  AllToAll,
  PointToPoint
};

llvm::StringRef stringifyCollectiveKind(CollectiveKind kind);

/// time = alpha * steps + beta * bytes-on-the-wire.
struct AlphaBeta {
  double alpha = 0; // seconds per message step
  double beta = 0;  // seconds per byte
};

/// What an op costs and where it runs.
struct OpCost {
  enum class Kind { None, Compute, Collective } kind = Kind::None;
  double flops = 0;
  double bytes = 0;   // bytes read + written (compute) or payload (collective)
  double seconds = 0; // predicted duration
  int64_t groupSize = 1;
  CollectiveKind collective = CollectiveKind::AllReduce;
};

class CostModel {
public:
  /// Defaults of a device kind: "h200" (NCCL over NVLink/IB), "a100",
  /// "cpu" (Gloo over TCP). Unknown names fall back to "h200".
  static CostModel forDevice(llvm::StringRef device);

  /// A profile in JSON (see docs/passes.md#cost-model); fields not given
  /// keep the defaults of its "device" (or of `base`).
  static llvm::Expected<CostModel> fromJSON(llvm::StringRef text);
  static llvm::Expected<CostModel> fromFile(llvm::StringRef path);

  /// Defaults of `device`, overridden by the profile at `path` if non-empty.
  static llvm::Expected<CostModel> load(llvm::StringRef device,
                                        llvm::StringRef path);
  /// load(), reporting a failure as an error on `anchor` (for passes).
  static mlir::FailureOr<CostModel> loadOrEmit(mlir::Operation *anchor,
                                               llvm::StringRef device,
                                               llvm::StringRef path);

  /// The cost of one op (Kind::None for ops that do no device work).
  OpCost estimate(mlir::Operation *op) const;

  /// The alpha-beta time of a collective of `bytes` (the full buffer: input
  /// of all-reduce / reduce-scatter / all-to-all, output of all-gather) over
  /// `groupSize` ranks along `dims`.
  double collectiveSeconds(CollectiveKind kind, int64_t groupSize, double bytes,
                           llvm::ArrayRef<llvm::StringRef> dims = {}) const;

  /// Roofline time of a compute op.
  double computeSeconds(double flops, double bytes) const;

  std::string device = "h200";
  double flopsPerSecond = 0;
  double bytesPerSecond = 0;
  double launchSeconds = 0;
  AlphaBeta collectives[5];
  /// Per-mesh-dim link (e.g. "host" crosses the network): the slowest of
  /// the reduced dims' entries replaces the kind's alpha-beta.
  llvm::StringMap<AlphaBeta> dimLinks;
};

} // namespace monarch

#endif // MONARCH_COMPILER_ANALYSIS_COSTMODEL_H
