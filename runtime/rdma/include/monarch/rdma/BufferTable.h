//===- BufferTable.h - The registered buffers a proc owns -------*- C++ -*-===//
//
// Owner side: buffer id -> memory. Entries are shared so a transfer that is
// being sent keeps its memory's owner (a Python tensor) alive after drop().
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_BUFFERTABLE_H
#define MONARCH_RDMA_BUFFERTABLE_H

#include "monarch/rdma/StagedMemory.h"
#include "monarch/rdma/Verbs.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace monarch::rdma {

struct OwnedRegion {
  uint64_t id = 0;
  uint8_t *data = nullptr;
  size_t size = 0;
  bool writable = true;
  std::shared_ptr<void> keepAlive;
  std::optional<MemoryKeys> verbs; ///< set when registered with a NIC
  /// Set when `data` is the host copy of memory the transport cannot
  /// reach (StagedMemory.h): reads refresh it, writes go through it.
  std::shared_ptr<StagedMemory> staged;
};

class BufferTable {
public:
  uint64_t add(std::shared_ptr<OwnedRegion> region);
  std::shared_ptr<OwnedRegion> find(uint64_t id) const;
  /// Null when `id` is not (or no longer) registered.
  std::shared_ptr<OwnedRegion> remove(uint64_t id);
  size_t size() const;

private:
  mutable std::mutex mu;
  uint64_t nextId = 0;
  std::map<uint64_t, std::shared_ptr<OwnedRegion>> regions;
};

} // namespace monarch::rdma

#endif // MONARCH_RDMA_BUFFERTABLE_H
