//===- Verbs.h - The thin interface over libibverbs -------------*- C++ -*-===//
//
// Everything the RDMA engine asks of an RDMA NIC, and nothing more: open a
// device, register memory in its protection domain, create an RC queue pair
// with its completion queue, walk it RESET->INIT->RTR->RTS, post one-sided
// READ/WRITE work requests and poll completions. Two implementations: the
// real one over libibverbs (IbVerbs.h) and an in-process loopback
// (LoopbackVerbs.h) that moves bytes between registered regions, so the code
// above this interface is tested on machines without an RDMA NIC.
//
// Objects are named by plain handles (numbers) owned by the device; the device
// releases whatever is still open when it is destroyed.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_VERBS_H
#define MONARCH_RDMA_VERBS_H

#include "monarch/runtime/util/Status.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace monarch::rdma {

struct VerbsDeviceInfo {
  std::string name;
  uint64_t guid = 0;
};

/// Access rights of a memory registration (IBV_ACCESS_* subset).
enum VerbsAccess : uint32_t {
  kLocalWrite = 1,
  kRemoteRead = 2,
  kRemoteWrite = 4,
};

struct MemoryKeys {
  uint64_t handle = 0; ///< the device's name for the registration
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

/// What a peer needs to connect its RC queue pair to ours; exchanged over
/// actor messages before RTR.
struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  std::string device; ///< informational (logs, errors)
};

enum class QpState { Reset, Init, Rtr, Rts, Error };
const char *qpStateName(QpState state);

enum class WorkOp { Read, Write };

struct WorkRequest {
  uint64_t wrId = 0;
  WorkOp op = WorkOp::Read;
  uint64_t localAddr = 0;
  uint32_t lkey = 0;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
};

/// Completion outcome (the ibv_wc_status values the engine distinguishes).
enum class WcStatus {
  Success,
  LocalProtection, ///< local key/range invalid
  RemoteAccess,    ///< remote key/range/rights invalid (dropped buffer)
  RemoteInvalid,   ///< remote QP refused the request
  RetryExceeded,   ///< the peer did not answer (gone, cable, crashed)
  Flushed,         ///< the QP went to the error state
  Other,
};
const char *wcStatusName(WcStatus status);

struct Completion {
  uint64_t wrId = 0;
  WcStatus status = WcStatus::Success;
  std::string detail; ///< vendor error text, if any
};

struct QpOptions {
  uint32_t maxSendWr = 128;
  uint8_t port = 1;
  uint8_t gidIndex = 0;
  uint32_t timeout = 14; ///< IB local ack timeout exponent
  uint32_t retryCount = 7;
};

/// One opened device with its protection domain.
class VerbsDevice {
public:
  virtual ~VerbsDevice() = default;
  virtual const std::string &name() const = 0;
  /// Largest single work request (ibv_port_attr.max_msg_sz).
  virtual uint64_t maxMessageSize() const = 0;

  virtual Expected<MemoryKeys> registerMemory(void *addr, size_t length,
                                              uint32_t access) = 0;
  /// dma-buf registration (CUDA memory where the driver exports it).
  virtual Expected<MemoryKeys> registerDmabuf(int fd, uint64_t offset,
                                              size_t length, uint64_t iova,
                                              uint32_t access) = 0;
  virtual Status deregisterMemory(uint64_t handle) = 0;

  /// A new RC queue pair (in RESET) with its own completion queue.
  virtual Expected<uint64_t> createQp(const QpOptions &options) = 0;
  virtual Status destroyQp(uint64_t qp) = 0;
  virtual Expected<QpEndpoint> localEndpoint(uint64_t qp) = 0;
  virtual Status modifyToInit(uint64_t qp) = 0;
  virtual Status modifyToRtr(uint64_t qp, const QpEndpoint &remote) = 0;
  virtual Status modifyToRts(uint64_t qp) = 0;
  virtual Expected<QpState> queryState(uint64_t qp) = 0;

  virtual Status post(uint64_t qp, const WorkRequest &request) = 0;
  /// Up to `max` completions of the QP's completion queue; never blocks.
  virtual Expected<std::vector<Completion>> poll(uint64_t qp, int max) = 0;
};

/// Device discovery.
class VerbsProvider {
public:
  virtual ~VerbsProvider() = default;
  virtual const char *kind() const = 0;
  virtual Expected<std::vector<VerbsDeviceInfo>> devices() = 0;
  virtual Expected<std::unique_ptr<VerbsDevice>>
  open(const std::string &name) = 0;
};

} // namespace monarch::rdma

#endif // MONARCH_RDMA_VERBS_H
