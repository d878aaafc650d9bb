//===- BufferTable.cpp - Owned registered buffers -------------------------===//
#include "monarch/rdma/BufferTable.h"

namespace monarch::rdma {

uint64_t BufferTable::add(std::shared_ptr<OwnedRegion> region) {
  std::lock_guard<std::mutex> guard(mu);
  region->id = ++nextId;
  regions[region->id] = region;
  return region->id;
}

std::shared_ptr<OwnedRegion> BufferTable::find(uint64_t id) const {
  std::lock_guard<std::mutex> guard(mu);
  auto it = regions.find(id);
  return it == regions.end() ? nullptr : it->second;
}

std::shared_ptr<OwnedRegion> BufferTable::remove(uint64_t id) {
  std::lock_guard<std::mutex> guard(mu);
  auto it = regions.find(id);
  if (it == regions.end())
    return nullptr;
  auto region = std::move(it->second);
  regions.erase(it);
  return region;
}

size_t BufferTable::size() const {
  std::lock_guard<std::mutex> guard(mu);
  return regions.size();
}

} // namespace monarch::rdma
