//===- OutlineStretches.h - A recording's runs of ATen calls, outlined ----===//
//
// A recording body that mixes ATen calls with what a compiled body cannot
// hold (transfers, collectives, borrows, calls of other recordings) is
// expanded at every call, instruction by instruction, and none of it runs as
// a compiled task or a CUDA graph. The pipeline's and DDP's steps are such
// bodies: their compute comes in long runs of ATen calls between a few sends
// or reduces. When such a recording is defined, the executor finds those
// runs ("stretches"), gives each a recording of its own, and calls it in the
// run's place (docs/plan.md, "CUDA graphs"):
//
//   std::vector<Stretch> found = findStretches(rec, minOps, inert);
//   ... compile each found[k].recording; keep those that compile ...
//   plan::Recording body = outlineStretches(rec, kept);  // stretch = k + 1
//
// so each call of the body expands to its other instructions plus one
// compiled call per stretch: one task on the stream, replayed as CUDA graphs
// where the plan marks the recording a candidate. Torch-free; tested on the
// CPU (test/runtime/tensor/OutlineStretchesTest.cpp).
//
// A stretch is a maximal run of `call_op`s on one mesh and stream, in which
//  - instructions that do nothing on this rank (`inert`: ATen calls and
//    deletions for meshes without it) are skipped and left out;
//  - `delete_refs` on the same mesh and stream stay: of refs the stretch
//    defined, inside its recording; of refs from before it, deferred to just
//    after its call (their memory is freed a few ops later; no value or
//    error changes, since nothing in the stretch uses them after);
//  - it ends before an instruction that uses or redefines a ref the stretch
//    deleted (the expansion reports that use exactly as before), or that
//    binds a ref from before the stretch other than as an in-place op's
//    returned self (`x.copy_(y)`).
// Its recording's formals are the refs from before it that it reads or
// writes, in first-use order; its results the refs it defines and leaves
// bound, in definition order; its refs keep their ids.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "monarch/tensor/plan.pb.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace monarch::tensor::detail {

/// One stretch of a recording body.
struct Stretch {
  size_t begin = 0, end = 0; ///< body instructions [begin, end)
  size_t ops = 0;            ///< its ATen calls
  int64_t mesh = 0, stream = 0;
  /// Formals, results and body; id and cuda_graph are the caller's to set.
  plan::Recording recording;
  /// Deletions of refs from before the stretch, to run after its call.
  std::vector<plan::Instruction> deferred;
};

/// The stretches of `rec`'s body with at least `minOps` ATen calls, in
/// order. `inert(inst)` is true for an instruction that does nothing on
/// this rank (only ATen calls and deletions are asked about).
std::vector<Stretch>
findStretches(const plan::Recording &rec, size_t minOps,
              const std::function<bool(const plan::Instruction &)> &inert);

/// `rec` with each of `stretches` (in order, from findStretches) replaced by
/// a `call_recording` with `recording` = rec's id and `stretch` = its index
/// + 1, at the id of its first instruction, followed by its deferred
/// deletions.
plan::Recording outlineStretches(const plan::Recording &rec,
                                 const std::vector<Stretch> &stretches);

} // namespace monarch::tensor::detail
