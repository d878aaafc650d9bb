//===- RdmaBuffer.h - Registered memory and one-sided transfers -*- C++ -*-===//
//
//   // owner (e.g. in an actor endpoint)
//   auto buf = monarch::rdma::RdmaBuffer::create(data, size);
//   return buf->handle();                      // send it in any message
//   // any other proc
//   monarch::rdma::readInto(handle, dst, n).get(10s);
//   monarch::rdma::writeFrom(handle, src, n, offset).get(10s);
//
// Memory is one contiguous host range. The buffer stays registered until
// drop() or destruction; later transfers fail with a "dropped" error.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_RDMABUFFER_H
#define MONARCH_RDMA_RDMABUFFER_H

#include "monarch/rdma/RdmaEngine.h"

namespace monarch::rdma {

class RdmaBuffer {
public:
  /// Registers `size` bytes at `data` with this process's engine.
  static Expected<RdmaBuffer> create(void *data, size_t size,
                                     bool writable = true,
                                     std::shared_ptr<void> keepAlive = {});
  /// Registers with a given engine (tests, several runtimes in a process).
  static Expected<RdmaBuffer> create(std::shared_ptr<RdmaEngine> engine,
                                     void *data, size_t size,
                                     bool writable = true,
                                     std::shared_ptr<void> keepAlive = {},
                                     std::shared_ptr<StagedMemory> staged = {});
  RdmaBuffer(RdmaBuffer &&) = default;
  RdmaBuffer &operator=(RdmaBuffer &&other);
  ~RdmaBuffer();

  const RdmaHandle &handle() const { return h; }
  bool dropped() const { return !engine; }
  /// Unregisters; a second drop() is an error.
  Status drop();

private:
  RdmaBuffer(std::shared_ptr<RdmaEngine> engine, RdmaHandle handle)
      : engine(std::move(engine)), h(std::move(handle)) {}
  std::shared_ptr<RdmaEngine> engine;
  RdmaHandle h;
};

/// Copies `length` bytes of the remote buffer, from `offset`, into `dst`.
Future<Unit> readInto(const RdmaHandle &src, void *dst, size_t length,
                      uint64_t offset = 0);
/// Copies `length` bytes from `src` into the remote buffer at `offset`.
Future<Unit> writeFrom(const RdmaHandle &dst, const void *src, size_t length,
                       uint64_t offset = 0);
/// Several operations at once (one future for all).
Future<Unit> submit(std::vector<RdmaOp> ops);

} // namespace monarch::rdma

#endif // MONARCH_RDMA_RDMABUFFER_H
