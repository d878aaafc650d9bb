#include "monarch/runtime/proc/CastTree.h"

#include <algorithm>
#include <tuple>

namespace monarch {

std::vector<CastChild> splitCastTree(std::vector<proto::CastTarget> targets,
                                     uint32_t fanout) {
  std::vector<CastChild> children;
  size_t n = targets.size();
  if (n == 0)
    return children;
  size_t groups = std::min<size_t>(std::max<uint32_t>(fanout, 1), n);
  size_t base = n / groups, extra = n % groups, at = 0;
  for (size_t g = 0; g < groups; ++g) {
    size_t size = base + (g < extra ? 1 : 0);
    CastChild child;
    child.head = std::move(targets[at]);
    child.rest.assign(std::make_move_iterator(targets.begin() + at + 1),
                      std::make_move_iterator(targets.begin() + at + size));
    children.push_back(std::move(child));
    at += size;
  }
  return children;
}

std::vector<int32_t> castTreeParents(size_t count, uint32_t fanout) {
  std::vector<int32_t> parents(count, -1);
  // (first, end, parent) of a group to split, exactly as splitCastTree does.
  std::vector<std::tuple<size_t, size_t, int32_t>> groupsToSplit{
      {0, count, -1}};
  while (!groupsToSplit.empty()) {
    auto [first, end, parent] = groupsToSplit.back();
    groupsToSplit.pop_back();
    size_t n = end - first;
    if (n == 0)
      continue;
    size_t groups = std::min<size_t>(std::max<uint32_t>(fanout, 1), n);
    size_t base = n / groups, extra = n % groups, at = first;
    for (size_t g = 0; g < groups; ++g) {
      size_t size = base + (g < extra ? 1 : 0);
      parents[at] = parent;
      groupsToSplit.emplace_back(at + 1, at + size, static_cast<int32_t>(at));
      at += size;
    }
  }
  return parents;
}

} // namespace monarch
