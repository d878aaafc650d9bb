//===- RegistrationCache.cpp - Reused memory registrations ---------------===//
#include "monarch/rdma/RegistrationCache.h"

#include "monarch/runtime/util/Log.h"

namespace monarch::rdma {

RegistrationCache::~RegistrationCache() {
  std::lock_guard<std::mutex> guard(mu);
  for (auto &[key, entry] : byKey)
    (void)device.deregisterMemory(entry.keys.handle);
}

Expected<MemoryKeys> RegistrationCache::acquire(void *addr, size_t length,
                                                uint32_t access,
                                                std::shared_ptr<void> keep) {
  Key key{reinterpret_cast<uintptr_t>(addr), length, access};
  std::lock_guard<std::mutex> guard(mu);
  auto it = byKey.find(key);
  if (it != byKey.end()) {
    ++hitCount;
    Entry &e = it->second;
    if (e.idle) {
      idleLru.erase(e.idlePos);
      e.idle = false;
    }
    ++e.uses;
    if (keep)
      e.keepAlive = std::move(keep);
    return e.keys;
  }
  ++missCount;
  auto keys = device.registerMemory(addr, length, access);
  if (!keys.ok())
    return keys.status();
  Entry e;
  e.keys = *keys;
  e.uses = 1;
  e.keepAlive = std::move(keep);
  byKey[key] = std::move(e);
  byHandle[keys->handle] = key;
  return *keys;
}

void RegistrationCache::release(const MemoryKeys &keys, bool evict) {
  std::lock_guard<std::mutex> guard(mu);
  auto h = byHandle.find(keys.handle);
  if (h == byHandle.end())
    return;
  Entry &e = byKey[h->second];
  if (e.uses > 0)
    --e.uses;
  if (e.uses > 0)
    return;
  if (evict) {
    Status s = device.deregisterMemory(e.keys.handle);
    if (!s.isOk())
      log::warning("rdma: deregistering memory: ", s.toString());
    byKey.erase(h->second);
    byHandle.erase(h);
    return;
  }
  e.idle = true;
  e.idlePos = idleLru.insert(idleLru.end(), h->second);
  evictIdleLocked(capacity);
}

void RegistrationCache::evictIdleLocked(size_t keep) {
  while (idleLru.size() > keep) {
    Key key = idleLru.front();
    idleLru.pop_front();
    auto it = byKey.find(key);
    (void)device.deregisterMemory(it->second.keys.handle);
    byHandle.erase(it->second.keys.handle);
    byKey.erase(it);
  }
}

void RegistrationCache::clearIdle() {
  std::lock_guard<std::mutex> guard(mu);
  evictIdleLocked(0);
}

uint64_t RegistrationCache::hits() const {
  std::lock_guard<std::mutex> guard(mu);
  return hitCount;
}
uint64_t RegistrationCache::misses() const {
  std::lock_guard<std::mutex> guard(mu);
  return missCount;
}
size_t RegistrationCache::entries() const {
  std::lock_guard<std::mutex> guard(mu);
  return byKey.size();
}

} // namespace monarch::rdma
