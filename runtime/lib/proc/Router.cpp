#include "monarch/runtime/proc/Router.h"

#include "monarch/runtime/util/Log.h"

namespace monarch {

uint64_t Router::openPort(MessageHandler handler) {
  uint64_t port = nextPort.fetch_add(1);
  std::lock_guard<std::mutex> guard(portsMu);
  ports[port] = std::make_shared<MessageHandler>(std::move(handler));
  return port;
}

void Router::closePort(uint64_t port) {
  std::lock_guard<std::mutex> guard(portsMu);
  ports.erase(port);
}

void Router::setServiceHandler(MessageHandler handler) {
  std::lock_guard<std::mutex> guard(portsMu);
  service = std::make_shared<MessageHandler>(std::move(handler));
}

size_t Router::heldBack() const {
  std::lock_guard<std::mutex> guard(sendersMu);
  size_t total = 0;
  for (const auto &[name, state] : senders) {
    std::lock_guard<std::mutex> g(state->mu);
    total += state->early.size();
  }
  return total;
}

Router::SenderState &Router::senderState(const std::string &sender) {
  std::lock_guard<std::mutex> guard(sendersMu);
  auto &slot = senders[sender];
  if (!slot)
    slot = std::make_unique<SenderState>();
  return *slot;
}

void Router::deliver(transport::Message &&message) {
  const auto &env = message.envelope;
  if (env.dest_port() != 0) {
    std::shared_ptr<MessageHandler> handler;
    {
      std::lock_guard<std::mutex> guard(portsMu);
      auto it = ports.find(env.dest_port());
      if (it != ports.end())
        handler = it->second;
    }
    if (handler)
      (*handler)(std::move(message));
    else
      log::debug("message to closed port ", env.dest_port(), " dropped");
    return;
  }
  if (env.body_case() == proto::Envelope::kResync) {
    resync(env.sender(), env.resync().next_seq());
    return;
  }
  if (env.seq() == 0 || env.sender().empty()) {
    deliverOrdered(std::move(message));
    return;
  }
  SenderState &state = senderState(env.sender());
  std::lock_guard<std::mutex> guard(state.mu);
  uint64_t seq = env.seq();
  if (seq < state.next) {
    // Only after a resync: a message the sender gave up on arrived late.
    log::debug("late message from ", env.sender(), " seq ", seq);
    deliverOrdered(std::move(message));
    return;
  }
  if (seq > state.next) {
    state.early.emplace(seq, std::move(message));
    return;
  }
  deliverOrdered(std::move(message));
  ++state.next;
  drainInOrder(state);
}

void Router::drainInOrder(SenderState &state) {
  for (auto it = state.early.begin();
       it != state.early.end() && it->first == state.next;
       it = state.early.erase(it)) {
    deliverOrdered(std::move(it->second));
    ++state.next;
  }
}

void Router::resync(const std::string &sender, uint64_t nextSeq) {
  SenderState &state = senderState(sender);
  std::lock_guard<std::mutex> guard(state.mu);
  // Everything below nextSeq that is here goes out in order; the rest is lost.
  for (auto it = state.early.begin();
       it != state.early.end() && it->first < nextSeq;
       it = state.early.erase(it))
    deliverOrdered(std::move(it->second));
  if (nextSeq > state.next)
    state.next = nextSeq;
  drainInOrder(state);
}

void Router::deliverOrdered(transport::Message &&message) {
  std::shared_ptr<MessageHandler> handler;
  {
    std::lock_guard<std::mutex> guard(portsMu);
    handler = service;
  }
  if (handler)
    (*handler)(std::move(message));
  else
    log::warning("no service for message from ", message.envelope.sender());
}

} // namespace monarch
