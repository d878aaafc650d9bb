#include "monarch/runtime/proc/CastTree.h"

#include <algorithm>

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

} // namespace monarch
