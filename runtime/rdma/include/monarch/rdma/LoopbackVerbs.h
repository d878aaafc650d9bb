//===- LoopbackVerbs.h - The Verbs interface inside one process -*- C++ -*-===//
//
// A software fabric that behaves like an RC transport between devices of one
// process: keys and ranges are checked as a NIC checks them, QPs must be
// connected (RTR/RTS) before work is accepted, READ/WRITE copy bytes between
// registered regions and complete on the poster's completion queue, and a
// peer that went away completes with RetryExceeded. Tests drive the RDMA
// engine through it; faults can be injected.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_LOOPBACKVERBS_H
#define MONARCH_RDMA_LOOPBACKVERBS_H

#include "monarch/rdma/Verbs.h"

#include <atomic>
#include <map>
#include <mutex>

namespace monarch::rdma {

/// Shared state of the loopback devices of one fabric.
class LoopbackFabric : public std::enable_shared_from_this<LoopbackFabric> {
public:
  /// Devices the provider of this fabric lists.
  explicit LoopbackFabric(std::vector<std::string> deviceNames,
                          uint64_t maxMessageSize = 1ull << 30);

  /// Completions stop being delivered (the engine's timeouts fire).
  void setStalled(bool stalled) { stall = stalled; }
  /// Every device of this name behaves as if its host died: its QPs stop
  /// answering (peers complete with RetryExceeded).
  void killDevice(const std::string &name);

  /// Counters for tests.
  uint64_t registrations() const { return regCount; }
  uint64_t workRequests() const { return wrCount; }

  // Used by the loopback devices.
  struct Region {
    std::string device;
    uint8_t *addr;
    size_t length;
    uint32_t access;
  };
  struct QueuePair {
    std::string device;
    QpState state = QpState::Reset;
    uint32_t qpn = 0;
    uint32_t psn = 0;
    uint32_t remoteQpn = 0;
    uint32_t maxSendWr = 0;
    std::vector<Completion> completions;
  };
  std::mutex mu;
  std::map<uint32_t, Region> regions; ///< by key (lkey == rkey here)
  std::map<uint32_t, QueuePair> qps;  ///< by qpn
  std::vector<std::string> names;
  std::map<std::string, bool> dead;
  uint64_t maxMessage;
  uint32_t nextKey = 0x1000;
  uint32_t nextQpn = 0x100;
  std::atomic<bool> stall{false};
  std::atomic<uint64_t> regCount{0};
  std::atomic<uint64_t> wrCount{0};
};

std::unique_ptr<VerbsProvider>
makeLoopbackProvider(std::shared_ptr<LoopbackFabric> fabric);

} // namespace monarch::rdma

#endif // MONARCH_RDMA_LOOPBACKVERBS_H
