//===- StagedMemory.h - Registered memory reached through a host copy -*- C++ -*-===//
//
// An RDMA buffer over memory the transport cannot touch -- a GPU's, with no
// NIC that registers it (dma-buf) -- is registered through a host copy of
// the same size: the owner brings the copy up to date before it serves each
// read and copies each write on into the memory, under one lock so that a
// write is never overwritten by a read's refresh half-way:
//
//   auto staged = cudaStagedMemory(devicePtr, hostCopy, size);   // owner
//   engine->registerBuffer(hostCopy, size, true, keep, *staged);
//
// Only the TCP fallback can serve such a buffer (the owner takes part in
// every transfer); a NIC would read the host copy behind the owner's back,
// so its handle carries no NIC keys and requesters use TCP (docs/rdma.md,
// "CUDA memory").
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_STAGEDMEMORY_H
#define MONARCH_RDMA_STAGEDMEMORY_H

#include "monarch/runtime/util/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace monarch::rdma {

class StagedMemory {
public:
  /// `host`: the host copy of `size` bytes, owned by the caller.
  StagedMemory(uint8_t *host, size_t size) : host(host), size(size) {}
  virtual ~StagedMemory() = default;

  /// Refreshes [offset, offset + length) of the host copy from the memory;
  /// the caller then sends it from the host copy.
  Status refresh(size_t offset, size_t length);
  /// Stores `length` bytes at `offset`: into the host copy, then the memory.
  Status store(size_t offset, const uint8_t *bytes, size_t length);

protected:
  /// Copies [offset, offset + length) of the memory into `to`.
  virtual Status copyOut(size_t offset, uint8_t *to, size_t length) = 0;
  /// Copies `length` bytes from `from` into the memory at `offset`.
  virtual Status copyIn(size_t offset, const uint8_t *from, size_t length) = 0;

private:
  Status checkRange(size_t offset, size_t length) const;

  std::mutex mu;
  uint8_t *host;
  size_t size;
};

/// CUDA device memory at `device` (a device pointer of this process) staged
/// through `host`. The copies use the CUDA driver of this process
/// (libcuda.so.1, loaded by torch once it has a CUDA tensor), in the primary
/// context of the memory's device (torch's): nothing CUDA is needed to build
/// this. Synchronous
/// copies on the legacy default stream: ordered after the work torch
/// issued on it, not after other streams' (synchronize those first).
/// Invalid when there is no CUDA driver or `device` is not device memory.
Expected<std::shared_ptr<StagedMemory>> cudaStagedMemory(uint64_t device,
                                                         uint8_t *host,
                                                         size_t size);

} // namespace monarch::rdma

#endif // MONARCH_RDMA_STAGEDMEMORY_H
