//===- LinkWatch.h - Telling many waiters that a link closed ----*- C++ -*-===//
//
// Every merged cast that a proc forwards waits for its children's replies; if
// the link to a child closes first, the child's part must be given up rather
// than waited for. One close handler per link tells every waiter, instead of
// one handler per cast piling up on a long-lived link. Waiters are held
// weakly: one whose owner is gone (its merge already sent) is skipped and
// pruned.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_LINKWATCH_H
#define MONARCH_RUNTIME_PROC_LINKWATCH_H

#include "monarch/runtime/transport/Transport.h"

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace monarch {

class LinkWatch : public std::enable_shared_from_this<LinkWatch> {
public:
  using OnClose = std::function<void(const Status &)>;

  /// Runs `onClose` once if `link` closes while `owner` lives (at once if
  /// it already has closed).
  void watch(const std::shared_ptr<transport::Link> &link,
             std::weak_ptr<const void> owner, OnClose onClose);

  /// Waiters registered and not yet pruned (tests).
  size_t waiting() const;

private:
  struct Waiter {
    std::weak_ptr<const void> owner;
    OnClose onClose;
  };
  struct Watched {
    std::weak_ptr<transport::Link> link;
    std::vector<Waiter> waiters;
    size_t pruneAt = 64;
  };
  void closed(const transport::Link *link, const Status &reason);

  mutable std::mutex mu;
  std::unordered_map<const transport::Link *, Watched> links;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_LINKWATCH_H
