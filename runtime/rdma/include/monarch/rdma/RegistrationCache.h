//===- RegistrationCache.h - Memory registrations reused --------*- C++ -*-===//
//
// Registering memory with a NIC pins pages and costs tens of microseconds per
// call; the same tensor is typically read into again and again. The cache
// keys registrations by (address, length, access): acquiring one that exists
// is free. Registrations in use are counted; an idle one stays cached (at
// most `capacity` idle entries, least recently used evicted first) unless
// released with `evict` (an owner's drop(), which must revoke its rkey).
//
// An idle entry keeps the memory's owner alive (when one was given), so the
// pages it pins cannot be freed and reused under it.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_REGISTRATIONCACHE_H
#define MONARCH_RDMA_REGISTRATIONCACHE_H

#include "monarch/rdma/Verbs.h"

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace monarch::rdma {

class RegistrationCache {
public:
  RegistrationCache(VerbsDevice &device, size_t capacity = 64)
      : device(device), capacity(capacity) {}
  ~RegistrationCache();

  Expected<MemoryKeys> acquire(void *addr, size_t length, uint32_t access,
                               std::shared_ptr<void> keepAlive = {});
  /// Ends one use; `evict` deregisters at once when no use remains.
  void release(const MemoryKeys &keys, bool evict);
  /// Deregisters every idle entry.
  void clearIdle();

  uint64_t hits() const;
  uint64_t misses() const;
  size_t entries() const;

private:
  using Key = std::tuple<uintptr_t, size_t, uint32_t>;
  struct Entry {
    MemoryKeys keys;
    size_t uses = 0;
    std::shared_ptr<void> keepAlive;
    std::list<Key>::iterator idlePos;
    bool idle = false;
  };
  void evictIdleLocked(size_t keep);

  VerbsDevice &device;
  size_t capacity;
  mutable std::mutex mu;
  std::map<Key, Entry> byKey;
  std::map<uint64_t, Key> byHandle;
  std::list<Key> idleLru; ///< front: least recently used
  uint64_t hitCount = 0;
  uint64_t missCount = 0;
};

} // namespace monarch::rdma

#endif // MONARCH_RDMA_REGISTRATIONCACHE_H
