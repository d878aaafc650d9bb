//===- RdmaOp.h - One transfer, its options and its completion --*- C++ -*-===//
#ifndef MONARCH_RDMA_RDMAOP_H
#define MONARCH_RDMA_RDMAOP_H

#include "monarch/rdma/RdmaHandle.h"
#include "monarch/rdma/Verbs.h"
#include "monarch/runtime/actor/Future.h"

#include <atomic>
#include <chrono>
#include <memory>

namespace monarch::rdma {

/// read: remote bytes -> local memory; write: local memory -> remote bytes.
struct RdmaOp {
  enum class Kind { Read, Write };
  Kind kind = Kind::Read;
  RdmaHandle remote;
  uint64_t remoteOffset = 0;
  void *local = nullptr;
  size_t length = 0;
  /// Keeps the local memory alive until the transfer is over (optional).
  std::shared_ptr<void> keepLocal;
};

struct RdmaOptions {
  /// TCP fallback: bytes per request/reply (MONARCH_RDMA_TCP_CHUNK_BYTES).
  size_t chunkBytes = 8u << 20;
  /// TCP fallback: parallel connections per peer
  /// (MONARCH_RDMA_TCP_CONNECTIONS).
  uint32_t lanes = 1;
  /// Whole-operation deadline (MONARCH_RDMA_TIMEOUT_MS).
  std::chrono::milliseconds timeout{60000};
  /// Verbs: largest work request (further capped by the device).
  size_t verbsChunkBytes = 1u << 30;
  /// Verbs: idle registrations kept cached.
  size_t registrationCacheEntries = 64;
  QpOptions qp;

  /// Defaults overridden by the MONARCH_RDMA_* environment variables.
  static RdmaOptions fromEnvironment();
};

/// Completion of a batch: counts the parts still running; the first error
/// wins and later parts are ignored.
class OpTracker {
public:
  explicit OpTracker(Promise<Unit> promise) : promise(std::move(promise)) {}
  void add(size_t parts = 1) { running += parts; }
  void done() {
    if (--running == 0)
      promise.set(Unit{});
  }
  void fail(Status status) {
    failedFlag = true;
    promise.set(std::move(status));
  }
  bool failed() const { return failedFlag; }

private:
  Promise<Unit> promise;
  std::atomic<size_t> running{0};
  std::atomic<bool> failedFlag{false};
};

} // namespace monarch::rdma

#endif // MONARCH_RDMA_RDMAOP_H
