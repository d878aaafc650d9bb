//===- GraphSegments.h - Which stretches of a recording are CUDA graphs ---===//
//
// A compiled recording (Executor.cpp's CompiledRecording: plain ATen calls
// and deletions on one stream) runs on a CUDA stream as captured CUDA graphs
// (docs/plan.md, "CUDA graphs"). Not every op can be captured: one that
// synchronizes with the host (`item`) or whose output shape comes from the
// data (`nonzero`, `unique`) fails a capture or would replay stale. segmentBody() decides once, when the recording is defined,
// how its body splits into captured segments and op-by-op parts, and what
// each captured segment reads, writes and leaves behind in the call's
// frame:
//
//   std::vector<StepAccess> steps = ...;      // one per body step
//   for (const GraphSegment &s : segmentBody(steps, kMinGraphOps))
//     s.captured ? replay(s) : runOpByOp(s.begin, s.end);
//
// The runtime then checks what only a call can tell (every input a CUDA
// tensor of the stream's device, shapes as captured) and runs a captured
// segment op by op for any call where that fails. No CUDA here: the logic
// is tested on the CPU (test/runtime/GraphSegmentsTest.cpp).
//
//===----------------------------------------------------------------------===//

#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace monarch::tensor::detail {

/// What segmenting needs of one step of a compiled body, as indexes into
/// the call's frame (formals, results, locals).
struct StepAccess {
  /// The ATen operator ("aten::add.Tensor"); empty for a deletion.
  std::string_view op;
  std::vector<uint32_t> reads;   ///< operands read (written ones too)
  std::vector<uint32_t> writes;  ///< operands written in place
  std::vector<uint32_t> defines; ///< results
  std::vector<uint32_t> frees;   ///< a deletion's cells
};

/// A stretch [begin, end) of the body's steps.
struct GraphSegment {
  size_t begin = 0, end = 0;
  /// Captured as one CUDA graph; false: run op by op.
  bool captured = false;
  /// Cells the segment reads that were bound before it: copied into the
  /// graph's fixed input buffers before each replay. In first-use order.
  std::vector<uint32_t> inputs;
  /// The inputs it writes in place: copied back after each replay.
  std::vector<uint32_t> writtenInputs;
  /// Cells it defines and leaves bound at its end: bound to the graph's
  /// fixed output buffers (or copies of them) after each replay.
  std::vector<uint32_t> outputs;
  /// Cells its deletions free: after a replay, those bound before the
  /// segment are cleared (the others were never bound outside the graph).
  std::vector<uint32_t> frees;
};

/// True for an op a CUDA graph cannot hold: it synchronizes with the host
/// or sizes its output from the data (the overload is ignored).
bool hostSyncOp(std::string_view op);

/// Splits `steps` into maximal runs without host-synchronizing ops (the
/// deletions between their calls included), captured when they hold at
/// least `minOps` ATen calls; the rest run op by op.
std::vector<GraphSegment> segmentBody(const std::vector<StepAccess> &steps,
                                      size_t minOps);

} // namespace monarch::tensor::detail
