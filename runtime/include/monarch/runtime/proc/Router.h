//===- Router.h - Dispatch of incoming messages in one process --*- C++ -*-===//
//
// Messages to port 0 go to the proc's service (casts, spawns, stop) in
// per-sender sequence order: a sender numbers its messages per destination
// proc, and casts forwarded through a tree may overtake or trail direct sends,
// so the router holds early arrivals until the gap fills. Messages to other
// ports (replies, readiness, supervision) are delivered as they arrive.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_ROUTER_H
#define MONARCH_RUNTIME_PROC_ROUTER_H

#include "monarch/runtime/transport/Message.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace monarch {

using MessageHandler = std::function<void(transport::Message &&)>;

class Router {
public:
  /// A port that receives messages addressed to it until closed.
  uint64_t openPort(MessageHandler handler);
  void closePort(uint64_t port);
  /// Receives ordered messages to port 0.
  void setServiceHandler(MessageHandler handler);

  /// Entry point for every message this process receives.
  void deliver(transport::Message &&message);

  /// Messages held back waiting for an earlier sequence number (for tests).
  size_t heldBack() const;

private:
  struct SenderState {
    std::mutex mu;
    uint64_t next = 1;
    std::map<uint64_t, transport::Message> early;
  };
  void deliverOrdered(transport::Message &&message);
  void resync(const std::string &sender, uint64_t nextSeq);
  void drainInOrder(SenderState &state);
  SenderState &senderState(const std::string &sender);

  mutable std::mutex portsMu;
  std::unordered_map<uint64_t, std::shared_ptr<MessageHandler>> ports;
  std::atomic<uint64_t> nextPort{1};
  std::shared_ptr<MessageHandler> service;

  mutable std::mutex sendersMu;
  std::unordered_map<std::string, std::unique_ptr<SenderState>> senders;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_ROUTER_H
