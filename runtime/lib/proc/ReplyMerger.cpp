#include "monarch/runtime/proc/ReplyMerger.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <algorithm>

namespace monarch {

namespace {
/// A reply the link could not encode (values past the 16 MiB control frame,
/// too many or too large payloads) would be dropped and leave its caller
/// waiting: its largest values become errors that say why, until it fits.
void fitReply(transport::Message &reply, const transport::FrameLimits &limits) {
  Status whole = transport::checkEncodable(reply, limits);
  if (whole.isOk() || !reply.envelope.has_cast_reply())
    return;
  auto *results = reply.envelope.mutable_cast_reply()->mutable_results();
  auto refuse = [&](proto::RankResult &r) {
    r.clear_value();
    r.set_error("the reply is too large to send: " + whole.message());
  };
  bool payloadsTooMany =
      reply.payloads.size() > limits.maxPayloadsPerMessage ||
      std::any_of(reply.payloads.begin(), reply.payloads.end(),
                  [&](const auto &p) { return p.size() > limits.maxPayloadBytes; });
  if (payloadsTooMany) {
    // Payload indices would need renumbering: fail every value instead.
    for (auto &r : *results)
      if (r.has_value())
        refuse(r);
    reply.payloads.clear();
  }
  std::vector<std::pair<size_t, int>> bySize;
  for (int i = 0; i < results->size(); ++i)
    if ((*results)[i].has_value())
      bySize.emplace_back((*results)[i].value().ByteSizeLong(), i);
  std::sort(bySize.rbegin(), bySize.rend());
  for (const auto &[bytes, i] : bySize) {
    if (transport::checkEncodable(reply, limits).isOk())
      break;
    refuse((*results)[i]);
  }
  log::error("a reply was too large to send (", whole.message(),
             "); its largest values were replaced by errors");
}
} // namespace

void sendToPort(Runtime &rt, const proto::PortRef &to,
                transport::Message &&reply) {
  // No sender: a port message is delivered at once, outside the per-sender
  // order (Router::deliver), so naming it would only cost bytes.
  reply.envelope.set_dest_port(to.port());
  if (to.addr() == rt.addr()) {
    rt.router().deliver(std::move(reply));
    return;
  }
  fitReply(reply, rt.transport().options().limits);
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
