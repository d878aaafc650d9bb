#include "monarch/runtime/proc/ReplyMerger.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

namespace monarch {

void sendToPort(Runtime &rt, const proto::PortRef &to,
                transport::Message &&reply) {
  // No sender: a port message is delivered at once, outside the per-sender
  // order (Router::deliver), so naming it would only cost bytes.
  reply.envelope.set_dest_port(to.port());
  if (to.addr() == rt.addr()) {
    rt.router().deliver(std::move(reply));
    return;
  }
  auto link = rt.link(to.addr());
  if (!link.ok()) {
    log::error("cannot reply to ", to.addr(), ": ", link.status().toString());
    return;
  }
  reply.awaited = true; // the caller (or a merging parent) waits for it
  (*link)->send(std::move(reply));
}

ReplyMerger::ReplyMerger(Runtime &rt, proto::PortRef upstream,
                         size_t expectedParts)
    : rt(rt), upstream(std::move(upstream)), remaining(expectedParts) {
  merged.envelope.mutable_cast_reply();
}

ReplyMerger::~ReplyMerger() {
  for (auto &child : children)
    if (child.port)
      rt.router().closePort(child.port);
}

std::pair<proto::PortRef, size_t>
ReplyMerger::openChildPort(std::vector<uint32_t> ranks) {
  // The port holds the merger alive until the child replied or the merge is
  // sent.
  auto self = shared_from_this();
  std::lock_guard<std::mutex> guard(mu);
  size_t index = children.size();
  Child child;
  child.ranks = std::move(ranks);
  child.port = rt.router().openPort([self, index](transport::Message &&reply) {
    self->addChild(index, std::move(reply));
  });
  proto::PortRef ref;
  ref.set_addr(rt.addr());
  ref.set_port(child.port);
  children.push_back(std::move(child));
  return {ref, index};
}

void ReplyMerger::addLocal(HandlerResult &&result) {
  std::unique_lock<std::mutex> lock(mu);
  auto *out = merged.envelope.mutable_cast_reply()->add_results();
  out->set_rank(result.rank);
  if (result.status.isOk()) {
    rebasePayloads(result.value, static_cast<uint32_t>(merged.payloads.size()));
    *out->mutable_value() = std::move(result.value);
    for (auto &p : result.payloads)
      merged.payloads.push_back(std::move(p));
  } else {
    out->set_error(result.status.message());
  }
  partDone(lock, 0);
}

ReplyMerger::Child *ReplyMerger::takeChild(size_t index, uint64_t &port) {
  if (index >= children.size() || children[index].done)
    return nullptr;
  Child &child = children[index];
  child.done = true;
  port = child.port;
  child.port = 0;
  return &child;
}

void ReplyMerger::addChild(size_t index, transport::Message &&reply) {
  std::unique_lock<std::mutex> lock(mu);
  uint64_t port = 0;
  if (!takeChild(index, port))
    return;
  uint32_t offset = static_cast<uint32_t>(merged.payloads.size());
  auto *results = reply.envelope.mutable_cast_reply()->mutable_results();
  auto *into = merged.envelope.mutable_cast_reply()->mutable_results();
  for (auto &r : *results) {
    if (r.has_value())
      rebasePayloads(*r.mutable_value(), offset);
    *into->Add() = std::move(r);
  }
  for (auto &p : reply.payloads)
    merged.payloads.push_back(std::move(p));
  partDone(lock, port);
}

void ReplyMerger::childLost(size_t index, const std::string &reason) {
  std::unique_lock<std::mutex> lock(mu);
  uint64_t port = 0;
  Child *child = takeChild(index, port);
  if (!child)
    return;
  auto *into = merged.envelope.mutable_cast_reply();
  for (uint32_t rank : child->ranks) {
    auto *r = into->add_results();
    r->set_rank(rank);
    r->set_error("unreachable: " + reason);
    r->set_unreachable(true);
  }
  partDone(lock, port);
}

void ReplyMerger::partDone(std::unique_lock<std::mutex> &lock,
                           uint64_t closingPort) {
  // The caller holds a reference (a port handler, a sink or a watcher), so
  // closing ports below cannot destroy this merger under our feet.
  std::vector<uint64_t> ports;
  if (closingPort)
    ports.push_back(closingPort);
  bool complete = remaining > 0 && --remaining == 0;
  transport::Message out;
  if (complete) {
    out = std::move(merged);
    for (auto &child : children)
      if (child.port) {
        ports.push_back(child.port);
        child.port = 0;
      }
  }
  lock.unlock();
  for (uint64_t port : ports)
    rt.router().closePort(port); // drops the port's reference to the merger
  if (complete)
    sendToPort(rt, upstream, std::move(out));
}

} // namespace monarch
