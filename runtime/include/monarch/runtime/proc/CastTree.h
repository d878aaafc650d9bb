//===- CastTree.h - Bounded fan-out casting trees --------------*- C++ -*-===//
//
// A cast to procs t0..tn-1 is split into at most `fanout` contiguous groups;
// the first proc of each group receives the message together with the rest of
// its group, which it splits again the same way. Depth is log_fanout(n); no
// proc sends or merges more than `fanout` messages per cast.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_CASTTREE_H
#define MONARCH_RUNTIME_PROC_CASTTREE_H

#include "runtime.pb.h"

#include <vector>

namespace monarch {

struct CastChild {
  proto::CastTarget head;
  std::vector<proto::CastTarget> rest;
};

/// Groups `targets` (moved into the result, not copied) into at most `fanout`
/// contiguous children.
std::vector<CastChild> splitCastTree(std::vector<proto::CastTarget> targets,
                                     uint32_t fanout);

/// The tree splitCastTree builds, hop by hop, over `count` targets: for each
/// target, the index of the target that forwards the cast to it (-1: the
/// caller). A target's replies pass through all of its ancestors.
std::vector<int32_t> castTreeParents(size_t count, uint32_t fanout);

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_CASTTREE_H
