#include "monarch/runtime/proc/LinkWatch.h"

#include <algorithm>

namespace monarch {

void LinkWatch::watch(const std::shared_ptr<transport::Link> &link,
                      std::weak_ptr<const void> owner, OnClose onClose) {
  const transport::Link *key = link.get();
  bool firstWaiter = false;
  {
    std::lock_guard<std::mutex> guard(mu);
    auto found = links.find(key);
    if (found == links.end() || found->second.link.lock() != link) {
      // A new link (or one reusing a destroyed link's address).
      found = links.insert_or_assign(key, Watched{}).first;
      found->second.link = link;
      firstWaiter = true;
    }
    auto &waiters = found->second.waiters;
    if (waiters.size() >= found->second.pruneAt) {
      waiters.erase(
          std::remove_if(waiters.begin(), waiters.end(),
                         [](const Waiter &w) { return w.owner.expired(); }),
          waiters.end());
      found->second.pruneAt = std::max<size_t>(64, waiters.size() * 2);
    }
    waiters.push_back(Waiter{std::move(owner), std::move(onClose)});
  }
  if (!firstWaiter)
    return;
  // Runs at once (and tells the waiter just added) if already closed.
  std::weak_ptr<LinkWatch> weak = shared_from_this();
  link->onClose([weak, key](const Status &reason) {
    if (auto self = weak.lock())
      self->closed(key, reason);
  });
}

void LinkWatch::closed(const transport::Link *link, const Status &reason) {
  std::vector<Waiter> waiters;
  {
    std::lock_guard<std::mutex> guard(mu);
    auto found = links.find(link);
    if (found == links.end())
      return;
    waiters.swap(found->second.waiters);
    links.erase(found);
  }
  for (auto &w : waiters)
    if (auto alive = w.owner.lock())
      w.onClose(reason);
}

size_t LinkWatch::waiting() const {
  std::lock_guard<std::mutex> guard(mu);
  size_t n = 0;
  for (const auto &[key, watched] : links)
    n += watched.waiters.size();
  return n;
}

} // namespace monarch
