//===- PeerChannel.cpp - Request/reply between RDMA engines --------------===//
#include "monarch/rdma/PeerChannel.h"

#include "WireValues.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

namespace monarch::rdma {

using Clock = std::chrono::steady_clock;

void Responder::reply(proto::Value value, PayloadList payloads) const {
  auto ch = channel.lock();
  if (!ch)
    return;
  proto::Value out;
  auto &m = *out.mutable_map();
  wire::setInt(m, "req", req);
  (*m.mutable_entries())["value"] = std::move(value);
  ch->send(addr, port, lane, std::move(out), std::move(payloads), false);
}

void Responder::fail(const Status &status) const {
  auto ch = channel.lock();
  if (!ch)
    return;
  proto::Value out;
  auto &m = *out.mutable_map();
  wire::setInt(m, "req", req);
  wire::setInt(m, "code", static_cast<int64_t>(status.code()));
  wire::setString(m, "error", status.message());
  ch->send(addr, port, lane, std::move(out), {}, false);
}

PeerChannel::PeerChannel(Runtime &rt) : rt(rt) {}

std::shared_ptr<PeerChannel> PeerChannel::create(Runtime &rt) {
  std::shared_ptr<PeerChannel> ch(new PeerChannel(rt));
  ch->start();
  return ch;
}

void PeerChannel::start() {
  std::weak_ptr<PeerChannel> weak = shared_from_this();
  requests =
      std::make_unique<Port>(rt, [weak](proto::Value &&v, PayloadList &&p) {
        if (auto self = weak.lock())
          self->onRequest(std::move(v), std::move(p));
      });
  replies =
      std::make_unique<Port>(rt, [weak](proto::Value &&v, PayloadList &&p) {
        if (auto self = weak.lock())
          self->onReply(std::move(v), std::move(p));
      });
  sweeper = std::thread([this] { sweep(); });
}

PeerChannel::~PeerChannel() {
  requests.reset();
  replies.reset();
  std::map<int64_t, Pending> left;
  std::unordered_map<std::string, std::shared_ptr<transport::Link>> open;
  {
    std::lock_guard<std::mutex> guard(mu);
    stopping = true;
    left.swap(pending);
    open.swap(links);
  }
  wake.notify_all();
  if (sweeper.joinable())
    sweeper.join();
  for (auto &[req, p] : left)
    p.promise.set(Status(ErrorCode::Closed, "the RDMA engine shut down"));
  for (auto &[key, link] : open)
    link->close();
}

void PeerChannel::serve(std::string op, RequestHandler handler) {
  std::lock_guard<std::mutex> guard(handlersMu);
  handlers[std::move(op)] = std::move(handler);
}

PeerAddress PeerChannel::address() const {
  auto ref = requests->ref();
  return {ref.addr(), ref.port()};
}

Future<PeerReply> PeerChannel::request(const PeerAddress &to,
                                       const std::string &op,
                                       proto::ValueMap args,
                                       PayloadList payloads, uint32_t lane,
                                       Clock::time_point deadline) {
  Promise<PeerReply> promise;
  std::string key = to.addr + "#" + std::to_string(lane);
  int64_t req;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (stopping)
      return Future<PeerReply>::failed(
          Status(ErrorCode::Closed, "the RDMA engine shut down"));
    req = ++nextReq;
    pending[req] = {promise, key, deadline, op + " on " + to.addr};
  }
  wake.notify_all();
  proto::Value v;
  auto &m = *v.mutable_map();
  auto replyRef = replies->ref();
  wire::setString(m, "op", op);
  wire::setInt(m, "req", req);
  wire::setString(m, "reply_addr", replyRef.addr());
  wire::setInt(m, "reply_port", static_cast<int64_t>(replyRef.port()));
  wire::setInt(m, "lane", lane);
  *(*m.mutable_entries())["args"].mutable_map() = std::move(args);
  send(to.addr, to.port, lane, std::move(v), std::move(payloads), true);
  return promise.future();
}

std::shared_ptr<transport::Link>
PeerChannel::linkTo(const std::string &addr, uint32_t lane, bool requester) {
  // Requests and replies use separate links so a lane's replies never queue
  // behind its own requests.
  std::string key = addr + "#" + std::to_string(lane) + (requester ? "" : "r");
  std::lock_guard<std::mutex> guard(mu);
  auto it = links.find(key);
  if (it != links.end() && !it->second->isClosed())
    return it->second;
  auto parsed = transport::ChannelAddr::parse(addr);
  if (!parsed.ok())
    return nullptr;
  auto link = rt.transport().connect(*parsed);
  links[key] = link;
  if (requester) {
    std::weak_ptr<PeerChannel> weak = shared_from_this();
    std::string pendingKey = addr + "#" + std::to_string(lane);
    link->onClose([weak, pendingKey](const Status &why) {
      if (auto self = weak.lock())
        self->failLink(pendingKey, why);
    });
  }
  return link;
}

void PeerChannel::send(const std::string &addr, uint64_t port, uint32_t lane,
                       proto::Value value, PayloadList payloads,
                       bool requester) {
  transport::Message m;
  m.envelope.set_dest_port(port);
  m.envelope.set_sender(rt.senderId());
  *m.envelope.mutable_port_message()->mutable_value() = std::move(value);
  m.payloads = std::move(payloads);
  if (addr == rt.addr()) {
    rt.router().deliver(std::move(m));
    return;
  }
  auto link = linkTo(addr, lane, requester);
  if (!link) {
    log::warning("rdma: bad peer address ", addr);
    return;
  }
  link->send(std::move(m));
}

void PeerChannel::onPeerLost(const std::string &addr,
                             std::function<void(const Status &)> handler) {
  auto link = linkTo(addr, 0, true);
  if (!link)
    return handler(Status(ErrorCode::Invalid, "bad peer address " + addr));
  link->onClose(std::move(handler));
}

void PeerChannel::failLink(const std::string &key, const Status &why) {
  std::vector<std::pair<Promise<PeerReply>, std::string>> failed;
  {
    std::lock_guard<std::mutex> guard(mu);
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->second.linkKey == key) {
        failed.emplace_back(it->second.promise, it->second.what);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto &[promise, what] : failed)
    promise.set(Status(
        ErrorCode::Closed,
        "RDMA " + what + ": the owner's proc went away during the transfer (" +
            why.message() + ")"));
}

void PeerChannel::onRequest(proto::Value &&value, PayloadList &&payloads) {
  if (value.kind_case() != proto::Value::kMap) {
    log::warning("rdma: malformed request dropped");
    return;
  }
  auto &m = *value.mutable_map();
  auto op = wire::getString(m, "op");
  auto req = wire::getInt(m, "req");
  auto addr = wire::getString(m, "reply_addr");
  auto port = wire::getInt(m, "reply_port");
  auto lane = wire::getInt(m, "lane");
  if (!op.ok() || !req.ok() || !addr.ok() || !port.ok() || !lane.ok()) {
    log::warning("rdma: malformed request dropped");
    return;
  }
  Responder responder;
  responder.channel = weak_from_this();
  responder.addr = *addr;
  responder.port = static_cast<uint64_t>(*port);
  responder.lane = static_cast<uint32_t>(*lane);
  responder.req = *req;
  RequestHandler handler;
  {
    std::lock_guard<std::mutex> guard(handlersMu);
    auto it = handlers.find(*op);
    if (it != handlers.end())
      handler = it->second;
  }
  if (!handler) {
    responder.fail(
        Status(ErrorCode::Invalid,
               "the owner does not serve RDMA request '" + *op + "'"));
    return;
  }
  proto::ValueMap args;
  auto a = m.mutable_entries()->find("args");
  if (a != m.mutable_entries()->end() &&
      a->second.kind_case() == proto::Value::kMap)
    args = std::move(*a->second.mutable_map());
  handler(std::move(args), std::move(payloads), std::move(responder));
}

void PeerChannel::onReply(proto::Value &&value, PayloadList &&payloads) {
  if (value.kind_case() != proto::Value::kMap)
    return;
  auto &m = *value.mutable_map();
  auto req = wire::getInt(m, "req");
  if (!req.ok())
    return;
  Promise<PeerReply> promise;
  {
    std::lock_guard<std::mutex> guard(mu);
    auto it = pending.find(*req);
    if (it == pending.end())
      return; // timed out or failed already
    promise = it->second.promise;
    pending.erase(it);
  }
  if (m.entries().count("error")) {
    auto code = wire::getInt(m, "code");
    auto text = wire::getString(m, "error");
    promise.set(
        Status(code.ok() ? static_cast<ErrorCode>(*code) : ErrorCode::Remote,
               text.ok() ? *text : "RDMA request failed"));
    return;
  }
  PeerReply reply;
  auto v = m.mutable_entries()->find("value");
  if (v != m.mutable_entries()->end())
    reply.value = std::move(v->second);
  reply.payloads = std::move(payloads);
  promise.set(std::move(reply));
}

void PeerChannel::sweep() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    // Deadlines are checked every 50 ms while requests wait.
    wake.wait_for(lock, pending.empty() ? std::chrono::milliseconds(1000)
                                        : std::chrono::milliseconds(50));
    auto now = Clock::now();
    std::vector<std::pair<Promise<PeerReply>, std::string>> expired;
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->second.deadline <= now) {
        expired.emplace_back(it->second.promise, it->second.what);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    for (auto &[promise, what] : expired)
      promise.set(Status(ErrorCode::Timeout,
                         "RDMA " + what + ": no answer before the deadline"));
    lock.lock();
  }
}

} // namespace monarch::rdma
