#include "monarch/runtime/proc/ReplyMerger.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

namespace monarch {

void sendToPort(Runtime &rt, const proto::PortRef &to,
                transport::Message &&reply) {
  reply.envelope.set_dest_port(to.port());
  reply.envelope.set_sender(rt.senderId());
  if (to.addr() == rt.addr()) {
    rt.router().deliver(std::move(reply));
    return;
  }
  auto link = rt.link(to.addr());
  if (!link.ok()) {
    log::error("cannot reply to ", to.addr(), ": ", link.status().toString());
    return;
  }
  (*link)->send(std::move(reply));
}

ReplyMerger::ReplyMerger(Runtime &rt, proto::PortRef upstream,
                         size_t expectedParts)
    : rt(rt), upstream(std::move(upstream)), remaining(expectedParts) {
  merged.envelope.mutable_cast_reply();
}

ReplyMerger::~ReplyMerger() {
  if (childPort)
    rt.router().closePort(childPort);
}

proto::PortRef ReplyMerger::openChildPort() {
  // The port holds the merger alive until the merge is sent.
  auto self = shared_from_this();
  childPort = rt.router().openPort(
      [self](transport::Message &&reply) { self->addChild(std::move(reply)); });
  proto::PortRef ref;
  ref.set_addr(rt.addr());
  ref.set_port(childPort);
  return ref;
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
  partDone(lock);
}

void ReplyMerger::addChild(transport::Message &&reply) {
  std::unique_lock<std::mutex> lock(mu);
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
  partDone(lock);
}

void ReplyMerger::partDone(std::unique_lock<std::mutex> &lock) {
  if (remaining == 0 || --remaining > 0)
    return;
  transport::Message out = std::move(merged);
  uint64_t port = childPort;
  childPort = 0;
  lock.unlock();
  if (port)
    rt.router().closePort(port); // drops the port's reference to this merger
  sendToPort(rt, upstream, std::move(out));
}

} // namespace monarch
