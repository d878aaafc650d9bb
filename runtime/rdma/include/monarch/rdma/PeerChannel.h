//===- PeerChannel.h - Requests between the RDMA engines of two procs -*- C++
//-*-===//
//
// The RDMA engine's messaging over the runtime's transport: a requester sends
// a named request (a map value plus raw payload frames) to an owner's service
// port and gets a Future of the reply. Both directions use links owned by
// the channel, one per (peer, lane), so several lanes give parallel
// connections, and a link that closes (the owner died) fails every request
// still waiting on it at once. Requests also fail at their deadline.
//
// Owner-side handlers run on the runtime's io thread: they must not block.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_PEERCHANNEL_H
#define MONARCH_RDMA_PEERCHANNEL_H

#include "monarch/runtime/actor/Future.h"
#include "monarch/runtime/actor/Value.h"
#include "monarch/runtime/proc/Port.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace monarch {
class Runtime;
namespace transport {
class Link;
}
} // namespace monarch

namespace monarch::rdma {

struct PeerReply {
  proto::Value value;
  PayloadList payloads;
};

/// Where a request goes.
struct PeerAddress {
  std::string addr;
  uint64_t port = 0;
};

class PeerChannel;

/// Completes one request on the owner side (exactly once).
class Responder {
public:
  void reply(proto::Value value, PayloadList payloads = {}) const;
  void fail(const Status &status) const;

private:
  friend class PeerChannel;
  std::weak_ptr<PeerChannel> channel;
  std::string addr;
  uint64_t port = 0;
  uint32_t lane = 0;
  int64_t req = 0;
};

using RequestHandler =
    std::function<void(proto::ValueMap &&args, PayloadList &&, Responder)>;

class PeerChannel : public std::enable_shared_from_this<PeerChannel> {
public:
  static std::shared_ptr<PeerChannel> create(Runtime &rt);
  ~PeerChannel();
  PeerChannel(const PeerChannel &) = delete;
  PeerChannel &operator=(const PeerChannel &) = delete;

  /// Owner side: serve requests named `op`.
  void serve(std::string op, RequestHandler handler);
  Runtime &runtime() { return rt; }
  /// Where peers send requests.
  PeerAddress address() const;

  Future<PeerReply> request(const PeerAddress &to, const std::string &op,
                            proto::ValueMap args, PayloadList payloads,
                            uint32_t lane,
                            std::chrono::steady_clock::time_point deadline);

  /// Runs `handler` when the connection to `addr` closes (its proc died).
  void onPeerLost(const std::string &addr,
                  std::function<void(const Status &)> handler);

private:
  friend class Responder;
  explicit PeerChannel(Runtime &rt);
  void start();
  void onRequest(proto::Value &&value, PayloadList &&payloads);
  void onReply(proto::Value &&value, PayloadList &&payloads);
  void send(const std::string &addr, uint64_t port, uint32_t lane,
            proto::Value value, PayloadList payloads, bool requester);
  std::shared_ptr<transport::Link> linkTo(const std::string &addr,
                                          uint32_t lane, bool requester);
  void failLink(const std::string &key, const Status &why);
  void sweep();

  Runtime &rt;
  std::unique_ptr<Port> requests;
  std::unique_ptr<Port> replies;

  std::mutex handlersMu;
  std::unordered_map<std::string, RequestHandler> handlers;

  struct Pending {
    Promise<PeerReply> promise;
    std::string linkKey;
    std::chrono::steady_clock::time_point deadline;
    std::string what;
  };
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  int64_t nextReq = 0;
  std::map<int64_t, Pending> pending;
  std::unordered_map<std::string, std::shared_ptr<transport::Link>> links;
  std::thread sweeper;
};

} // namespace monarch::rdma

#endif // MONARCH_RDMA_PEERCHANNEL_H
