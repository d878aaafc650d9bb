//===- VerbsTransport.cpp - Connections, work requests, completions ------===//
#include "monarch/rdma/VerbsTransport.h"

#include "WireValues.h"

#include "monarch/runtime/util/Log.h"

#include <cstring>

namespace monarch::rdma {

using Clock = std::chrono::steady_clock;

namespace {

proto::ValueMap endpointToMap(const QpEndpoint &e) {
  proto::ValueMap m;
  wire::setInt(m, "qpn", e.qpn);
  wire::setInt(m, "psn", e.psn);
  wire::setInt(m, "lid", e.lid);
  wire::setBytes(m, "gid", std::string(e.gid.begin(), e.gid.end()));
  wire::setString(m, "device", e.device);
  return m;
}

Expected<QpEndpoint> endpointFromMap(const proto::ValueMap &m) {
  auto qpn = wire::getInt(m, "qpn");
  auto psn = wire::getInt(m, "psn");
  auto lid = wire::getInt(m, "lid");
  auto gid = wire::getString(m, "gid");
  auto device = wire::getString(m, "device");
  if (!qpn.ok() || !psn.ok() || !lid.ok() || !gid.ok() || !device.ok() ||
      gid->size() != 16)
    return Status(ErrorCode::Invalid, "malformed queue pair endpoint");
  QpEndpoint e;
  e.qpn = static_cast<uint32_t>(*qpn);
  e.psn = static_cast<uint32_t>(*psn);
  e.lid = static_cast<uint16_t>(*lid);
  std::memcpy(e.gid.data(), gid->data(), 16);
  e.device = *device;
  return e;
}

/// RESET -> INIT -> RTR(remote) -> RTS, stopping at the first error.
Status connectQp(VerbsDevice &device, uint64_t qp, const QpEndpoint &remote,
                 bool initDone) {
  if (!initDone) {
    Status s = device.modifyToInit(qp);
    if (!s.isOk())
      return s;
  }
  Status s = device.modifyToRtr(qp, remote);
  if (!s.isOk())
    return s;
  return device.modifyToRts(qp);
}

} // namespace

Status completionError(WcStatus status, const RdmaHandle &remote,
                       const std::string &detail) {
  std::string what = remote.describe() + ": " + wcStatusName(status) +
                     (detail.empty() ? "" : " (" + detail + ")");
  switch (status) {
  case WcStatus::Success:
    return Status::ok();
  case WcStatus::RemoteAccess:
    return Status(ErrorCode::NotFound,
                  what + ": the buffer was dropped or its key is stale");
  case WcStatus::RetryExceeded:
    return Status(ErrorCode::Closed,
                  what + ": the owner's proc or NIC stopped answering");
  case WcStatus::Flushed:
    return Status(ErrorCode::Closed,
                  what + ": the queue pair failed on an earlier request");
  case WcStatus::RemoteInvalid:
    return Status(ErrorCode::Invalid, what);
  case WcStatus::LocalProtection:
  case WcStatus::Other:
    return Status(ErrorCode::Internal, what);
  }
  return Status(ErrorCode::Internal, what);
}

VerbsTransport::VerbsTransport(std::unique_ptr<VerbsDevice> device,
                               std::shared_ptr<PeerChannel> channel,
                               RdmaOptions options)
    : device(std::move(device)), channel(std::move(channel)), options(options),
      registrations(std::make_unique<RegistrationCache>(
          *this->device, options.registrationCacheEntries)) {}

std::shared_ptr<VerbsTransport>
VerbsTransport::create(std::unique_ptr<VerbsDevice> device,
                       std::shared_ptr<PeerChannel> channel,
                       RdmaOptions options) {
  std::shared_ptr<VerbsTransport> t(
      new VerbsTransport(std::move(device), std::move(channel), options));
  t->serveConnect();
  t->poller = std::thread([raw = t.get()] { raw->pollLoop(); });
  return t;
}

VerbsTransport::~VerbsTransport() {
  std::map<uint64_t, Outstanding> left;
  {
    std::lock_guard<std::mutex> guard(mu);
    stopping = true;
    left.swap(outstanding);
  }
  wake.notify_all();
  if (poller.joinable())
    poller.join();
  for (auto &[wr, o] : left)
    o.tracker->fail(Status(ErrorCode::Closed, "the RDMA engine shut down"));
  for (auto &[owner, conn] : connections)
    (void)device->destroyQp(conn->qp);
  for (auto &[peer, qp] : servedQps)
    (void)device->destroyQp(qp);
  registrations.reset();
}

Expected<MemoryKeys> VerbsTransport::registerOwned(void *data, size_t size,
                                                   bool writable,
                                                   std::shared_ptr<void> keep) {
  uint32_t access = kLocalWrite | kRemoteRead | (writable ? kRemoteWrite : 0);
  return registrations->acquire(data, size, access, std::move(keep));
}

void VerbsTransport::releaseOwned(const MemoryKeys &keys) {
  registrations->release(keys, /*evict=*/true);
}

void VerbsTransport::serveConnect() {
  std::weak_ptr<VerbsTransport> weak = weak_from_this();
  channel->serve("verbs.connect", [weak](proto::ValueMap &&args, PayloadList &&,
                                         Responder responder) {
    auto self = weak.lock();
    if (!self)
      return responder.fail(
          Status(ErrorCode::Closed, "the owner's RDMA engine shut down"));
    auto remote = endpointFromMap(args);
    auto peer = wire::getString(args, "peer");
    if (!remote.ok() || !peer.ok())
      return responder.fail(
          Status(ErrorCode::Invalid, "malformed verbs.connect request"));
    auto qp = self->device->createQp(self->options.qp);
    if (!qp.ok())
      return responder.fail(qp.status());
    Status s = connectQp(*self->device, *qp, *remote, false);
    auto local = self->device->localEndpoint(*qp);
    if (s.isOk() && !local.ok())
      s = local.status();
    if (!s.isOk()) {
      (void)self->device->destroyQp(*qp);
      return responder.fail(s);
    }
    {
      std::lock_guard<std::mutex> guard(self->mu);
      auto it = self->servedQps.find(*peer);
      if (it != self->servedQps.end())
        (void)self->device->destroyQp(it->second); // the peer reconnected
      self->servedQps[*peer] = *qp;
    }
    proto::Value reply;
    *reply.mutable_map() = endpointToMap(*local);
    responder.reply(std::move(reply));
  });
}

std::shared_ptr<VerbsTransport::Connection>
VerbsTransport::connection(const PeerAddress &owner,
                           Clock::time_point deadline) {
  std::shared_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> guard(mu);
    auto it = connections.find(owner.addr);
    if (it != connections.end() && !it->second->failed)
      return it->second;
    conn = std::make_shared<Connection>();
    conn->owner = owner.addr;
    connections[owner.addr] = conn;
  }
  auto qp = device->createQp(options.qp);
  if (!qp.ok()) {
    conn->failed = true;
    conn->ready.set(qp.status());
    return conn;
  }
  conn->qp = *qp;
  Status s = device->modifyToInit(*qp);
  auto local = device->localEndpoint(*qp);
  if (s.isOk() && !local.ok())
    s = local.status();
  if (!s.isOk()) {
    failConnection(conn, s);
    return conn;
  }
  proto::ValueMap args = endpointToMap(*local);
  wire::setString(args, "peer", channel->address().addr);
  std::weak_ptr<VerbsTransport> weak = weak_from_this();
  channel->request(owner, "verbs.connect", std::move(args), {}, 0, deadline)
      .then([weak, conn](const Expected<PeerReply> &reply) {
        auto self = weak.lock();
        if (!self)
          return;
        if (!reply.ok())
          return self->failConnection(conn, reply.status());
        Status s;
        auto remote = reply->value.kind_case() == proto::Value::kMap
                          ? endpointFromMap(reply->value.map())
                          : Expected<QpEndpoint>(Status(ErrorCode::Invalid,
                                                        "malformed endpoint"));
        s = remote.ok() ? connectQp(*self->device, conn->qp, *remote, true)
                        : remote.status();
        if (!s.isOk())
          return self->failConnection(conn, s);
        conn->ready.set(Unit{});
      });
  // A dead owner fails the connection at once rather than at the NIC's
  // retry timeout.
  channel->onPeerLost(owner.addr, [weak, conn](const Status &why) {
    if (auto self = weak.lock())
      self->failConnection(
          conn, Status(ErrorCode::Closed,
                       "the owner's proc went away: " + why.message()));
  });
  return conn;
}

void VerbsTransport::start(const RdmaOp &op,
                           const std::shared_ptr<OpTracker> &tracker,
                           Clock::time_point deadline) {
  tracker->add();
  auto conn =
      connection({op.remote.ownerAddr, op.remote.servicePort}, deadline);
  std::weak_ptr<VerbsTransport> weak = weak_from_this();
  conn->ready.future().then([weak, conn, op, tracker,
                             deadline](const Expected<Unit> &ready) {
    auto self = weak.lock();
    if (!self)
      return tracker->fail(Status(ErrorCode::Closed, "RDMA engine shut down"));
    if (!ready.ok())
      return tracker->fail(ready.status());
    self->post(conn, op, tracker, deadline);
    tracker->done();
  });
}

void VerbsTransport::post(const std::shared_ptr<Connection> &conn,
                          const RdmaOp &op,
                          const std::shared_ptr<OpTracker> &tracker,
                          Clock::time_point deadline) {
  size_t chunk = std::min<uint64_t>(
      std::max<size_t>(options.verbsChunkBytes, 1), device->maxMessageSize());
  chunk = std::min<size_t>(chunk, UINT32_MAX);
  size_t parts = (op.length + chunk - 1) / chunk;
  auto keys =
      registrations->acquire(op.local, op.length, kLocalWrite, op.keepLocal);
  if (!keys.ok())
    return tracker->fail(keys.status());
  tracker->add(parts);
  Failures failed;
  {
    std::lock_guard<std::mutex> guard(mu);
    for (size_t i = 0; i < parts; ++i) {
      size_t pos = i * chunk;
      WorkRequest wr;
      wr.op = op.kind == RdmaOp::Kind::Read ? WorkOp::Read : WorkOp::Write;
      wr.localAddr = reinterpret_cast<uint64_t>(op.local) + pos;
      wr.lkey = keys->lkey;
      wr.remoteAddr = op.remote.remoteAddr + op.remoteOffset + pos;
      wr.rkey = op.remote.rkey;
      wr.length = static_cast<uint32_t>(std::min(chunk, op.length - pos));
      // Each work request holds one use of the registration.
      if (i > 0)
        (void)registrations->acquire(op.local, op.length, kLocalWrite);
      conn->backlog.emplace_back(
          wr, Outstanding{conn, tracker, *keys, op.remote, deadline});
    }
    pumpLocked(conn, failed);
  }
  report(failed);
  wake.notify_all();
}

void VerbsTransport::pumpLocked(const std::shared_ptr<Connection> &conn,
                                Failures &failed) {
  while (!conn->backlog.empty() &&
         (conn->failed || conn->inflight < options.qp.maxSendWr)) {
    auto [wr, o] = std::move(conn->backlog.front());
    conn->backlog.pop_front();
    if (conn->failed) {
      failed.emplace_back(
          std::move(o), Status(ErrorCode::Closed, "RDMA connection to " +
                                                      conn->owner + " failed"));
      continue;
    }
    wr.wrId = ++nextWr;
    Status posted = device->post(conn->qp, wr);
    if (!posted.isOk()) {
      failed.emplace_back(std::move(o), posted);
      continue;
    }
    ++conn->inflight;
    outstanding[wr.wrId] = std::move(o);
  }
}

/// Fails operations outside the lock: their futures' callbacks may start
/// new work on this transport.
void VerbsTransport::report(Failures &failed) {
  for (auto &[o, why] : failed) {
    registrations->release(o.localKeys, false);
    o.tracker->fail(why);
  }
  failed.clear();
}

void VerbsTransport::failConnection(const std::shared_ptr<Connection> &conn,
                                    const Status &why) {
  std::vector<Outstanding> failed;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (conn->failed && conn->qp == 0)
      return;
    conn->failed = true;
    for (auto it = outstanding.begin(); it != outstanding.end();) {
      if (it->second.conn == conn) {
        failed.push_back(std::move(it->second));
        it = outstanding.erase(it);
      } else {
        ++it;
      }
    }
    for (auto &[wr, o] : conn->backlog)
      failed.push_back(std::move(o));
    conn->backlog.clear();
    auto it = connections.find(conn->owner);
    if (it != connections.end() && it->second == conn)
      connections.erase(it);
    // Destroying the QP means no completion of it can land later.
    if (conn->qp) {
      (void)device->destroyQp(conn->qp);
      conn->qp = 0;
    }
  }
  conn->ready.set(why);
  for (auto &o : failed) {
    registrations->release(o.localKeys, false);
    o.tracker->fail(why);
  }
}

void VerbsTransport::pollLoop() {
  std::unique_lock<std::mutex> lock(mu);
  int idlePolls = 0;
  while (!stopping) {
    if (outstanding.empty()) {
      wake.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    std::vector<std::shared_ptr<Connection>> active;
    for (auto &[wr, o] : outstanding)
      if (active.empty() || active.back() != o.conn)
        active.push_back(o.conn);
    std::vector<std::pair<Outstanding, Completion>> done;
    std::vector<std::pair<std::shared_ptr<Connection>, Status>> broken;
    Failures pumpFailures;
    auto now = Clock::now();
    for (auto &conn : active) {
      if (conn->failed)
        continue;
      auto completions = device->poll(conn->qp, 64);
      if (!completions.ok()) {
        broken.emplace_back(conn, completions.status());
        continue;
      }
      for (auto &c : *completions) {
        auto it = outstanding.find(c.wrId);
        if (it == outstanding.end())
          continue;
        if (c.status != WcStatus::Success && !conn->failed) {
          // From now on no new operation may pick this connection.
          conn->failed = true;
          auto found = connections.find(conn->owner);
          if (found != connections.end() && found->second == conn)
            connections.erase(found);
        }
        done.emplace_back(std::move(it->second), std::move(c));
        outstanding.erase(it);
        --conn->inflight;
      }
      pumpLocked(conn, pumpFailures);
    }
    for (auto &[wr, o] : outstanding)
      if (o.deadline <= now && !o.conn->failed)
        broken.emplace_back(o.conn,
                            Status(ErrorCode::Timeout,
                                   o.remote.describe() +
                                       ": no completion before the deadline"));
    lock.unlock();
    report(pumpFailures);
    for (auto &[o, c] : done) {
      registrations->release(o.localKeys, false);
      if (c.status == WcStatus::Success) {
        o.tracker->done();
        continue;
      }
      Status why = completionError(c.status, o.remote, c.detail);
      // An RC queue pair in error flushes everything after; start over.
      failConnection(o.conn, why);
      o.tracker->fail(why);
    }
    for (auto &[conn, why] : broken)
      failConnection(conn, why);
    // Spin briefly while completions flow, then back off a little.
    idlePolls = done.empty() ? idlePolls + 1 : 0;
    if (idlePolls > 64)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else
      std::this_thread::yield();
    lock.lock();
  }
}

size_t VerbsTransport::connectionCount() {
  std::lock_guard<std::mutex> guard(mu);
  return connections.size();
}

Expected<QpState> VerbsTransport::connectionState(const std::string &owner) {
  std::shared_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> guard(mu);
    auto it = connections.find(owner);
    if (it == connections.end())
      return Status(ErrorCode::NotFound, "no RDMA connection to " + owner);
    conn = it->second;
  }
  return device->queryState(conn->qp);
}

} // namespace monarch::rdma
