//===- LoopbackVerbs.cpp - In-process software RC fabric -----------------===//
#include "monarch/rdma/LoopbackVerbs.h"

#include <cstring>

namespace monarch::rdma {

LoopbackFabric::LoopbackFabric(std::vector<std::string> deviceNames,
                               uint64_t maxMessageSize)
    : names(std::move(deviceNames)), maxMessage(maxMessageSize) {}

void LoopbackFabric::killDevice(const std::string &name) {
  std::lock_guard<std::mutex> guard(mu);
  dead[name] = true;
}

namespace {

using Fabric = LoopbackFabric;

class LoopbackDevice : public VerbsDevice {
public:
  LoopbackDevice(std::shared_ptr<Fabric> fabric, std::string name)
      : fabric(std::move(fabric)), deviceName(std::move(name)) {}
  ~LoopbackDevice() override {
    std::lock_guard<std::mutex> guard(fabric->mu);
    for (auto it = fabric->regions.begin(); it != fabric->regions.end();)
      it = it->second.device == deviceName ? fabric->regions.erase(it)
                                           : std::next(it);
    for (auto it = fabric->qps.begin(); it != fabric->qps.end();)
      it = it->second.device == deviceName ? fabric->qps.erase(it)
                                           : std::next(it);
  }

  const std::string &name() const override { return deviceName; }
  uint64_t maxMessageSize() const override { return fabric->maxMessage; }

  Expected<MemoryKeys> registerMemory(void *addr, size_t length,
                                      uint32_t access) override {
    if (!addr || length == 0)
      return Status(ErrorCode::Invalid, "cannot register an empty region");
    std::lock_guard<std::mutex> guard(fabric->mu);
    uint32_t key = ++fabric->nextKey;
    fabric->regions[key] = {deviceName, static_cast<uint8_t *>(addr), length,
                            access | kLocalWrite};
    ++fabric->regCount;
    return MemoryKeys{key, key, key};
  }

  Expected<MemoryKeys> registerDmabuf(int, uint64_t, size_t, uint64_t,
                                      uint32_t) override {
    return Status(ErrorCode::Invalid,
                  "the loopback fabric has no dma-buf support");
  }

  Status deregisterMemory(uint64_t handle) override {
    std::lock_guard<std::mutex> guard(fabric->mu);
    auto it = fabric->regions.find(static_cast<uint32_t>(handle));
    if (it == fabric->regions.end() || it->second.device != deviceName)
      return Status(ErrorCode::NotFound,
                    "no memory registration " + std::to_string(handle));
    fabric->regions.erase(it);
    return Status::ok();
  }

  Expected<uint64_t> createQp(const QpOptions &options) override {
    std::lock_guard<std::mutex> guard(fabric->mu);
    uint32_t qpn = ++fabric->nextQpn;
    auto &qp = fabric->qps[qpn];
    qp.device = deviceName;
    qp.qpn = qpn;
    qp.psn = qpn * 7919u & 0xffffff;
    qp.maxSendWr = options.maxSendWr;
    return static_cast<uint64_t>(qpn);
  }

  Status destroyQp(uint64_t qp) override {
    std::lock_guard<std::mutex> guard(fabric->mu);
    if (!fabric->qps.erase(static_cast<uint32_t>(qp)))
      return Status(ErrorCode::NotFound, "no queue pair " + std::to_string(qp));
    return Status::ok();
  }

  Expected<QpEndpoint> localEndpoint(uint64_t qp) override {
    std::lock_guard<std::mutex> guard(fabric->mu);
    auto *q = find(qp);
    if (!q)
      return Status(ErrorCode::NotFound, "no queue pair " + std::to_string(qp));
    QpEndpoint e;
    e.qpn = q->qpn;
    e.psn = q->psn;
    e.lid = 1;
    e.device = deviceName;
    return e;
  }

  Status modifyToInit(uint64_t qp) override {
    return transition(qp, QpState::Reset, QpState::Init, nullptr);
  }
  Status modifyToRtr(uint64_t qp, const QpEndpoint &remote) override {
    return transition(qp, QpState::Init, QpState::Rtr, &remote);
  }
  Status modifyToRts(uint64_t qp) override {
    return transition(qp, QpState::Rtr, QpState::Rts, nullptr);
  }

  Expected<QpState> queryState(uint64_t qp) override {
    std::lock_guard<std::mutex> guard(fabric->mu);
    auto *q = find(qp);
    if (!q)
      return Status(ErrorCode::NotFound, "no queue pair " + std::to_string(qp));
    return q->state;
  }

  Status post(uint64_t qp, const WorkRequest &wr) override {
    std::lock_guard<std::mutex> guard(fabric->mu);
    auto *q = find(qp);
    if (!q)
      return Status(ErrorCode::NotFound, "no queue pair " + std::to_string(qp));
    // ibv_post_send fails with EINVAL before RTS.
    if (q->state != QpState::Rts)
      return Status(ErrorCode::Invalid,
                    std::string("ibv_post_send: queue pair in ") +
                        qpStateName(q->state) + ", not RTS");
    if (q->completions.size() >= q->maxSendWr)
      return Status(ErrorCode::Internal, "ibv_post_send: send queue full");
    if (wr.length > fabric->maxMessage)
      return Status(ErrorCode::Invalid, "ibv_post_send: message too long");
    ++fabric->wrCount;
    q->completions.push_back({wr.wrId, execute(*q, wr), ""});
    return Status::ok();
  }

  Expected<std::vector<Completion>> poll(uint64_t qp, int max) override {
    std::lock_guard<std::mutex> guard(fabric->mu);
    auto *q = find(qp);
    if (!q)
      return Status(ErrorCode::NotFound, "no queue pair " + std::to_string(qp));
    std::vector<Completion> out;
    if (fabric->stall)
      return out;
    size_t n = std::min(q->completions.size(), static_cast<size_t>(max));
    out.assign(q->completions.begin(), q->completions.begin() + n);
    q->completions.erase(q->completions.begin(), q->completions.begin() + n);
    return out;
  }

private:
  Fabric::QueuePair *find(uint64_t qp) {
    auto it = fabric->qps.find(static_cast<uint32_t>(qp));
    if (it == fabric->qps.end() || it->second.device != deviceName)
      return nullptr;
    return &it->second;
  }

  Status transition(uint64_t qp, QpState from, QpState to,
                    const QpEndpoint *remote) {
    std::lock_guard<std::mutex> guard(fabric->mu);
    auto *q = find(qp);
    if (!q)
      return Status(ErrorCode::NotFound, "no queue pair " + std::to_string(qp));
    if (q->state != from)
      return Status(ErrorCode::Invalid,
                    std::string("ibv_modify_qp: cannot go from ") +
                        qpStateName(q->state) + " to " + qpStateName(to));
    if (remote)
      q->remoteQpn = remote->qpn;
    q->state = to;
    return Status::ok();
  }

  bool covers(const Fabric::Region &r, uint64_t addr, uint64_t len) {
    auto base = reinterpret_cast<uint64_t>(r.addr);
    return addr >= base && len <= r.length && addr - base <= r.length - len;
  }

  /// Runs the work request the way the responder's NIC would.
  WcStatus execute(Fabric::QueuePair &q, const WorkRequest &wr) {
    if (fabric->dead[deviceName])
      return WcStatus::RetryExceeded;
    auto peer = fabric->qps.find(q.remoteQpn);
    if (peer == fabric->qps.end() || fabric->dead[peer->second.device])
      return WcStatus::RetryExceeded;
    if (peer->second.state != QpState::Rtr &&
        peer->second.state != QpState::Rts)
      return WcStatus::RemoteInvalid;
    auto local = fabric->regions.find(wr.lkey);
    if (local == fabric->regions.end() || local->second.device != deviceName ||
        !covers(local->second, wr.localAddr, wr.length))
      return WcStatus::LocalProtection;
    auto remote = fabric->regions.find(wr.rkey);
    uint32_t need = wr.op == WorkOp::Read ? kRemoteRead : kRemoteWrite;
    if (remote == fabric->regions.end() ||
        remote->second.device != peer->second.device ||
        !(remote->second.access & need) ||
        !covers(remote->second, wr.remoteAddr, wr.length))
      return WcStatus::RemoteAccess;
    auto *l = reinterpret_cast<uint8_t *>(wr.localAddr);
    auto *r = reinterpret_cast<uint8_t *>(wr.remoteAddr);
    if (wr.op == WorkOp::Read)
      std::memcpy(l, r, wr.length);
    else
      std::memcpy(r, l, wr.length);
    return WcStatus::Success;
  }

  std::shared_ptr<Fabric> fabric;
  std::string deviceName;
};

class LoopbackProvider : public VerbsProvider {
public:
  explicit LoopbackProvider(std::shared_ptr<Fabric> fabric)
      : fabric(std::move(fabric)) {}
  const char *kind() const override { return "loopback"; }
  Expected<std::vector<VerbsDeviceInfo>> devices() override {
    std::vector<VerbsDeviceInfo> out;
    for (size_t i = 0; i < fabric->names.size(); ++i)
      out.push_back({fabric->names[i], 0x1000 + i});
    return out;
  }
  Expected<std::unique_ptr<VerbsDevice>>
  open(const std::string &name) override {
    for (const auto &n : fabric->names)
      if (n == name)
        return std::unique_ptr<VerbsDevice>(new LoopbackDevice(fabric, name));
    return Status(ErrorCode::NotFound, "no RDMA device named '" + name + "'");
  }

private:
  std::shared_ptr<Fabric> fabric;
};

} // namespace

std::unique_ptr<VerbsProvider>
makeLoopbackProvider(std::shared_ptr<LoopbackFabric> fabric) {
  return std::make_unique<LoopbackProvider>(std::move(fabric));
}

} // namespace monarch::rdma
