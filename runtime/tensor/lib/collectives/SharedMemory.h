//===- SharedMemory.h - A POSIX shared memory object, mapped ---*- C++ -*-===//
//
// Usage:
//
//   auto made = SharedMemory::create("ipc", bytes);   // zero-filled
//   publish(made.value()->name());                     // through the store
//   // another process of this host (and IPC namespace):
//   auto seen = SharedMemory::open(name, bytes);
//   seen.value()->unlink();                            // once all have it
//
// Why: processes of one host that must tell each other small things at
// memory speed (which slot of a CUDA IPC ring holds what; a collective's
// control words) share a page instead of a socket round trip. The name is
// unlinked as soon as everyone has it mapped (and by the creator when it
// goes, in case someone never came), so nothing outlives the processes in
// /dev/shm; the names of processes SIGKILLed in between are removed by the
// next one made. The mapping is released with the object.
// Descriptors are close-on-exec and closed once mapped.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_COLLECTIVES_SHAREDMEMORY_H
#define MONARCH_TENSOR_COLLECTIVES_SHAREDMEMORY_H

#include "monarch/tensor/Status.h"

#include <memory>
#include <string>

namespace monarch::tensor {

class SharedMemory {
public:
  /// A new object "/monarch-<purpose>-<pid>-<n>-<random>" of `bytes`,
  /// zero-filled, mapped read-write.
  static Expected<std::unique_ptr<SharedMemory>>
  create(const std::string &purpose, size_t bytes);
  /// Maps the object `name` made by another process; it must hold `bytes`.
  static Expected<std::unique_ptr<SharedMemory>> open(const std::string &name,
                                                      size_t bytes);
  /// Unmaps; the creator also unlinks the name (ENOENT when done already).
  ~SharedMemory();
  SharedMemory(const SharedMemory &) = delete;
  SharedMemory &operator=(const SharedMemory &) = delete;

  void *address() const { return base; }
  const std::string &name() const { return path; }
  /// Removes the name: processes that mapped it keep their mappings.
  void unlink();

private:
  SharedMemory(std::string path, size_t bytes, bool creator)
      : path(std::move(path)), bytes(bytes), creator(creator) {}
  Status map(int fd);

  std::string path;
  size_t bytes;
  bool creator;
  void *base = nullptr;
};

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_COLLECTIVES_SHAREDMEMORY_H
