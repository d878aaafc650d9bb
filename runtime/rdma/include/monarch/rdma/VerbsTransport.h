//===- VerbsTransport.h - RDMA reads and writes through a NIC ---*- C++ -*-===//
//
// Everything above the Verbs interface: owner-side registration of buffers
// (through the registration cache), one RC queue pair per (requester, owner)
// connected by exchanging QpEndpoints over the PeerChannel (the requester's
// QP goes RESET->INIT, the owner's INIT->RTR->RTS on the request, the
// requester's RTR->RTS on the reply), operations cut into work requests no
// larger than the device allows, a poller thread that drains completion
// queues, and the mapping of completion errors and deadlines onto the
// operation's future. A connection that fails (error completion, deadline) is
// torn down, so no late completion can write into memory the caller got back;
// the next operation reconnects.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_VERBSTRANSPORT_H
#define MONARCH_RDMA_VERBSTRANSPORT_H

#include "monarch/rdma/PeerChannel.h"
#include "monarch/rdma/RdmaOp.h"
#include "monarch/rdma/RegistrationCache.h"

#include <deque>
#include <map>
#include <thread>

namespace monarch::rdma {

/// The error a failed completion means for the operation.
Status completionError(WcStatus status, const RdmaHandle &remote,
                       const std::string &detail);

class VerbsTransport : public std::enable_shared_from_this<VerbsTransport> {
public:
  static std::shared_ptr<VerbsTransport>
  create(std::unique_ptr<VerbsDevice> device,
         std::shared_ptr<PeerChannel> channel, RdmaOptions options);
  ~VerbsTransport();

  const std::string &deviceName() const { return device->name(); }
  RegistrationCache &cache() { return *registrations; }

  // Owner side.
  Expected<MemoryKeys> registerOwned(void *data, size_t size, bool writable,
                                     std::shared_ptr<void> keepAlive);
  /// Revokes the registration (its rkey stops working).
  void releaseOwned(const MemoryKeys &keys);

  // Requester side: `op` is validated and its handle has verbs fields.
  void start(const RdmaOp &op, const std::shared_ptr<OpTracker> &tracker,
             std::chrono::steady_clock::time_point deadline);

  size_t connectionCount();
  /// State of our queue pair towards `owner` (tests, diagnostics).
  Expected<QpState> connectionState(const std::string &owner);

private:
  struct Connection;
  struct Outstanding {
    std::shared_ptr<Connection> conn;
    std::shared_ptr<OpTracker> tracker;
    MemoryKeys localKeys;
    RdmaHandle remote;
    std::chrono::steady_clock::time_point deadline;
  };
  struct Connection {
    std::string owner;
    uint64_t qp = 0;
    bool failed = false;
    Promise<Unit> ready;
    /// Posted and not yet completed (at most QpOptions::maxSendWr).
    size_t inflight = 0;
    /// Work requests waiting for room in the send queue.
    std::deque<std::pair<WorkRequest, Outstanding>> backlog;
  };
  using Failures = std::vector<std::pair<Outstanding, Status>>;

  VerbsTransport(std::unique_ptr<VerbsDevice> device,
                 std::shared_ptr<PeerChannel> channel, RdmaOptions options);
  void serveConnect();
  std::shared_ptr<Connection>
  connection(const PeerAddress &owner,
             std::chrono::steady_clock::time_point deadline);
  void post(const std::shared_ptr<Connection> &conn, const RdmaOp &op,
            const std::shared_ptr<OpTracker> &tracker,
            std::chrono::steady_clock::time_point deadline);
  void failConnection(const std::shared_ptr<Connection> &conn,
                      const Status &why);
  /// Posts backlog while the send queue has room; called with `mu` held.
  void pumpLocked(const std::shared_ptr<Connection> &conn, Failures &failed);
  void report(Failures &failed);
  void pollLoop();

  std::unique_ptr<VerbsDevice> device;
  std::shared_ptr<PeerChannel> channel;
  RdmaOptions options;
  std::unique_ptr<RegistrationCache> registrations;

  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  std::map<std::string, std::shared_ptr<Connection>> connections;
  std::map<std::string, uint64_t> servedQps;   ///< owner side, by requester
  std::map<uint64_t, Outstanding> outstanding; ///< by work request id
  uint64_t nextWr = 0;
  std::thread poller;
};

} // namespace monarch::rdma

#endif // MONARCH_RDMA_VERBSTRANSPORT_H
