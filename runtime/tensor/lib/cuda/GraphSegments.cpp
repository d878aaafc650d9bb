//===- GraphSegments.cpp - Which stretches of a recording are CUDA graphs -===//

#include "GraphSegments.h"

#include <algorithm>
#include <array>
#include <unordered_set>

namespace monarch::tensor::detail {

bool hostSyncOp(std::string_view op) {
  // Operators by name without the overload: "aten::nonzero.out" is nonzero.
  std::string_view base = op.substr(0, op.find('.'));
  // Each reads device data on the host (a sync, which a capture refuses)
  // or sizes its output from it (a replay would keep the captured size).
  // Copies and casts are not here: on the device they are captured, and
  // one to the CPU is found when the call runs (its CPU result or its
  // failed capture keeps that segment op by op).
  static constexpr std::array<std::string_view, 18> kHostSync = {
      "aten::item",          "aten::_local_scalar_dense",
      "aten::nonzero",       "aten::nonzero_static",
      "aten::masked_select", "aten::unique",
      "aten::_unique",       "aten::_unique2",
      "aten::unique_consecutive", "aten::unique_dim",
      "aten::bincount",      "aten::histc",
      "aten::repeat_interleave", "aten::equal",
      "aten::allclose",      "aten::is_nonzero",
      "aten::_print",        "aten::resize_"};
  return std::find(kHostSync.begin(), kHostSync.end(), base) != kHostSync.end();
}

namespace {

/// Fills in what a captured segment reads, writes and leaves behind.
void describe(GraphSegment &seg, const std::vector<StepAccess> &steps) {
  std::unordered_set<uint32_t> defined, inputs, written, live, freed;
  for (size_t k = seg.begin; k < seg.end; ++k) {
    const StepAccess &s = steps[k];
    for (uint32_t r : s.reads)
      if (!defined.count(r) && inputs.insert(r).second)
        seg.inputs.push_back(r);
    for (uint32_t w : s.writes)
      if (!defined.count(w) && written.insert(w).second)
        seg.writtenInputs.push_back(w);
    for (uint32_t d : s.defines) {
      defined.insert(d);
      live.insert(d);
    }
    for (uint32_t f : s.frees) {
      live.erase(f);
      if (freed.insert(f).second)
        seg.frees.push_back(f);
    }
  }
  // Outputs in definition order, for stable binding.
  for (size_t k = seg.begin; k < seg.end; ++k)
    for (uint32_t d : steps[k].defines)
      if (live.erase(d))
        seg.outputs.push_back(d);
}

} // namespace

std::vector<GraphSegment> segmentBody(const std::vector<StepAccess> &steps,
                                      size_t minOps) {
  std::vector<GraphSegment> out;
  auto opByOp = [&](size_t begin, size_t end) {
    if (begin == end)
      return;
    if (!out.empty() && !out.back().captured)
      out.back().end = end; // merge with the op-by-op part before
    else
      {
      GraphSegment seg;
      seg.begin = begin;
      seg.end = end;
      out.push_back(std::move(seg));
    }
  };
  size_t k = 0;
  while (k < steps.size()) {
    // A run: ATen calls that are not host syncs, with the deletions
    // between them.
    size_t begin = k, calls = 0;
    for (; k < steps.size(); ++k) {
      const StepAccess &s = steps[k];
      if (s.op.empty())
        continue;
      if (hostSyncOp(s.op))
        break;
      ++calls;
    }
    if (calls >= std::max<size_t>(minOps, 1)) {
      GraphSegment seg;
      seg.begin = begin;
      seg.end = k;
      seg.captured = true;
      describe(seg, steps);
      out.push_back(std::move(seg));
    } else {
      opByOp(begin, k);
    }
    if (k < steps.size()) {
      opByOp(k, k + 1); // the step that ended the run
      ++k;
    }
  }
  return out;
}

} // namespace monarch::tensor::detail
