//===- IbVerbs.cpp - libibverbs implementation of VerbsDevice ------------===//
#include "monarch/rdma/IbVerbs.h"

#ifdef MONARCH_HAVE_IBVERBS
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

namespace monarch::rdma {
namespace {

Status errnoStatus(const std::string &what) {
  return Status(ErrorCode::Internal, what + ": " + std::strerror(errno));
}

int toIbAccess(uint32_t access) {
  int flags = 0;
  if (access & kLocalWrite)
    flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteRead)
    flags |= IBV_ACCESS_REMOTE_READ;
  if (access & kRemoteWrite)
    flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  return flags;
}

WcStatus fromIbStatus(ibv_wc_status status) {
  switch (status) {
  case IBV_WC_SUCCESS:
    return WcStatus::Success;
  case IBV_WC_LOC_PROT_ERR:
  case IBV_WC_LOC_LEN_ERR:
    return WcStatus::LocalProtection;
  case IBV_WC_REM_ACCESS_ERR:
    return WcStatus::RemoteAccess;
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_OP_ERR:
    return WcStatus::RemoteInvalid;
  case IBV_WC_RETRY_EXC_ERR:
  case IBV_WC_RNR_RETRY_EXC_ERR:
    return WcStatus::RetryExceeded;
  case IBV_WC_WR_FLUSH_ERR:
    return WcStatus::Flushed;
  default:
    return WcStatus::Other;
  }
}

struct Qp {
  ibv_cq *cq = nullptr;
  ibv_qp *qp = nullptr;
  uint32_t psn = 0;
};

class IbDevice : public VerbsDevice {
public:
  IbDevice(ibv_context *ctx, ibv_pd *pd, std::string name, QpOptions opts,
           uint64_t maxMsg)
      : ctx(ctx), pd(pd), deviceName(std::move(name)), defaults(opts),
        maxMsg(maxMsg) {}
  ~IbDevice() override {
    for (auto &[id, q] : qps) {
      ibv_destroy_qp(q.qp);
      ibv_destroy_cq(q.cq);
    }
    for (auto &[id, mr] : mrs)
      ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
  }

  const std::string &name() const override { return deviceName; }
  uint64_t maxMessageSize() const override { return maxMsg; }

  Expected<MemoryKeys> registerMemory(void *addr, size_t length,
                                      uint32_t access) override {
    ibv_mr *mr = ibv_reg_mr(pd, addr, length, toIbAccess(access));
    if (!mr)
      return errnoStatus("ibv_reg_mr");
    return remember(mr);
  }

  Expected<MemoryKeys> registerDmabuf(int fd, uint64_t offset, size_t length,
                                      uint64_t iova, uint32_t access) override {
    ibv_mr *mr =
        ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, toIbAccess(access));
    if (!mr)
      return errnoStatus("ibv_reg_dmabuf_mr");
    return remember(mr);
  }

  Status deregisterMemory(uint64_t handle) override {
    std::lock_guard<std::mutex> guard(mu);
    auto it = mrs.find(handle);
    if (it == mrs.end())
      return Status(ErrorCode::NotFound,
                    "no memory registration " + std::to_string(handle));
    int rc = ibv_dereg_mr(it->second);
    mrs.erase(it);
    if (rc)
      return Status(ErrorCode::Internal,
                    std::string("ibv_dereg_mr: ") + std::strerror(rc));
    return Status::ok();
  }

  Expected<uint64_t> createQp(const QpOptions &options) override {
    Qp q;
    q.cq = ibv_create_cq(ctx, static_cast<int>(options.maxSendWr), nullptr,
                         nullptr, 0);
    if (!q.cq)
      return errnoStatus("ibv_create_cq");
    ibv_qp_init_attr init{};
    init.send_cq = q.cq;
    init.recv_cq = q.cq;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 1;
    init.cap.max_send_wr = options.maxSendWr;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    q.qp = ibv_create_qp(pd, &init);
    if (!q.qp) {
      Status s = errnoStatus("ibv_create_qp");
      ibv_destroy_cq(q.cq);
      return s;
    }
    q.psn = std::random_device{}() & 0xffffff;
    std::lock_guard<std::mutex> guard(mu);
    uint64_t id = ++nextId;
    qps[id] = q;
    qpOptions[id] = options;
    return id;
  }

  Status destroyQp(uint64_t id) override {
    std::lock_guard<std::mutex> guard(mu);
    auto it = qps.find(id);
    if (it == qps.end())
      return Status(ErrorCode::NotFound, "no queue pair " + std::to_string(id));
    ibv_destroy_qp(it->second.qp);
    ibv_destroy_cq(it->second.cq);
    qps.erase(it);
    qpOptions.erase(id);
    return Status::ok();
  }

  Expected<QpEndpoint> localEndpoint(uint64_t id) override {
    auto q = find(id);
    if (!q.ok())
      return q.status();
    const QpOptions &o = options(id);
    ibv_port_attr port{};
    if (ibv_query_port(ctx, o.port, &port))
      return errnoStatus("ibv_query_port");
    ibv_gid gid{};
    if (ibv_query_gid(ctx, o.port, o.gidIndex, &gid))
      return errnoStatus("ibv_query_gid");
    QpEndpoint e;
    e.qpn = q->qp->qp_num;
    e.psn = q->psn;
    e.lid = port.lid;
    std::memcpy(e.gid.data(), gid.raw, 16);
    e.device = deviceName;
    return e;
  }

  Status modifyToInit(uint64_t id) override {
    auto q = find(id);
    if (!q.ok())
      return q.status();
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = options(id).port;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_LOCAL_WRITE;
    return modify(q->qp, attr,
                  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                      IBV_QP_ACCESS_FLAGS,
                  "INIT");
  }

  Status modifyToRtr(uint64_t id, const QpEndpoint &remote) override {
    auto q = find(id);
    if (!q.ok())
      return q.status();
    const QpOptions &o = options(id);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_4096;
    attr.dest_qp_num = remote.qpn;
    attr.rq_psn = remote.psn;
    attr.max_dest_rd_atomic = 16;
    attr.min_rnr_timer = 12;
    attr.ah_attr.dlid = remote.lid;
    attr.ah_attr.port_num = o.port;
    bool global = false;
    for (uint8_t b : remote.gid)
      global |= b != 0;
    if (global) {
      attr.ah_attr.is_global = 1;
      std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
      attr.ah_attr.grh.sgid_index = o.gidIndex;
      attr.ah_attr.grh.hop_limit = 64;
    }
    return modify(q->qp, attr,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                      IBV_QP_MIN_RNR_TIMER,
                  "RTR");
  }

  Status modifyToRts(uint64_t id) override {
    auto q = find(id);
    if (!q.ok())
      return q.status();
    const QpOptions &o = options(id);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = q->psn;
    attr.timeout = o.timeout;
    attr.retry_cnt = o.retryCount;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 16;
    return modify(q->qp, attr,
                  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_MAX_QP_RD_ATOMIC,
                  "RTS");
  }

  Expected<QpState> queryState(uint64_t id) override {
    auto q = find(id);
    if (!q.ok())
      return q.status();
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(q->qp, &attr, IBV_QP_STATE, &init))
      return errnoStatus("ibv_query_qp");
    switch (attr.qp_state) {
    case IBV_QPS_RESET:
      return QpState::Reset;
    case IBV_QPS_INIT:
      return QpState::Init;
    case IBV_QPS_RTR:
      return QpState::Rtr;
    case IBV_QPS_RTS:
      return QpState::Rts;
    default:
      return QpState::Error;
    }
  }

  Status post(uint64_t id, const WorkRequest &request) override {
    auto q = find(id);
    if (!q.ok())
      return q.status();
    ibv_sge sge{};
    sge.addr = request.localAddr;
    sge.length = request.length;
    sge.lkey = request.lkey;
    ibv_send_wr wr{};
    wr.wr_id = request.wrId;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode =
        request.op == WorkOp::Read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = request.remoteAddr;
    wr.wr.rdma.rkey = request.rkey;
    ibv_send_wr *bad = nullptr;
    if (int rc = ibv_post_send(q->qp, &wr, &bad))
      return Status(ErrorCode::Internal,
                    std::string("ibv_post_send: ") + std::strerror(rc));
    return Status::ok();
  }

  Expected<std::vector<Completion>> poll(uint64_t id, int max) override {
    auto q = find(id);
    if (!q.ok())
      return q.status();
    std::vector<ibv_wc> wcs(static_cast<size_t>(max));
    int n = ibv_poll_cq(q->cq, max, wcs.data());
    if (n < 0)
      return Status(ErrorCode::Internal, "ibv_poll_cq failed");
    std::vector<Completion> out;
    for (int i = 0; i < n; ++i) {
      Completion c;
      c.wrId = wcs[i].wr_id;
      c.status = fromIbStatus(wcs[i].status);
      if (wcs[i].status != IBV_WC_SUCCESS)
        c.detail = ibv_wc_status_str(wcs[i].status);
      out.push_back(std::move(c));
    }
    return out;
  }

private:
  Expected<MemoryKeys> remember(ibv_mr *mr) {
    std::lock_guard<std::mutex> guard(mu);
    uint64_t id = ++nextId;
    mrs[id] = mr;
    return MemoryKeys{id, mr->lkey, mr->rkey};
  }
  Expected<Qp> find(uint64_t id) {
    std::lock_guard<std::mutex> guard(mu);
    auto it = qps.find(id);
    if (it == qps.end())
      return Status(ErrorCode::NotFound, "no queue pair " + std::to_string(id));
    return it->second;
  }
  const QpOptions &options(uint64_t id) {
    std::lock_guard<std::mutex> guard(mu);
    return qpOptions[id];
  }
  static Status modify(ibv_qp *qp, ibv_qp_attr &attr, int mask,
                       const char *to) {
    if (int rc = ibv_modify_qp(qp, &attr, mask))
      return Status(ErrorCode::Internal, std::string("ibv_modify_qp to ") + to +
                                             ": " + std::strerror(rc));
    return Status::ok();
  }

  ibv_context *ctx;
  ibv_pd *pd;
  std::string deviceName;
  QpOptions defaults;
  uint64_t maxMsg;
  std::mutex mu;
  uint64_t nextId = 0;
  std::map<uint64_t, ibv_mr *> mrs;
  std::map<uint64_t, Qp> qps;
  std::map<uint64_t, QpOptions> qpOptions;
};

class IbProvider : public VerbsProvider {
public:
  explicit IbProvider(QpOptions defaults) : defaults(defaults) {}
  const char *kind() const override { return "ibverbs"; }

  Expected<std::vector<VerbsDeviceInfo>> devices() override {
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (!list && errno == ENOSYS)
      return Status(ErrorCode::NotFound,
                    "the kernel has no RDMA support (ibv_get_device_list: "
                    "ENOSYS)");
    if (!list)
      return errnoStatus("ibv_get_device_list");
    std::vector<VerbsDeviceInfo> out;
    for (int i = 0; i < n; ++i)
      out.push_back(
          {ibv_get_device_name(list[i]), ibv_get_device_guid(list[i])});
    ibv_free_device_list(list);
    return out;
  }

  Expected<std::unique_ptr<VerbsDevice>>
  open(const std::string &name) override {
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (!list)
      return errnoStatus("ibv_get_device_list");
    ibv_context *ctx = nullptr;
    for (int i = 0; i < n && !ctx; ++i)
      if (name == ibv_get_device_name(list[i]))
        ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    if (!ctx)
      return Status(ErrorCode::NotFound, "no RDMA device named '" + name + "'");
    ibv_port_attr port{};
    if (ibv_query_port(ctx, defaults.port, &port)) {
      ibv_close_device(ctx);
      return errnoStatus("ibv_query_port");
    }
    ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd) {
      Status s = errnoStatus("ibv_alloc_pd");
      ibv_close_device(ctx);
      return s;
    }
    return std::unique_ptr<VerbsDevice>(
        new IbDevice(ctx, pd, name, defaults, port.max_msg_sz));
  }

private:
  QpOptions defaults;
};

} // namespace

std::unique_ptr<VerbsProvider> makeIbVerbsProvider(QpOptions defaults) {
  return std::make_unique<IbProvider>(defaults);
}

} // namespace monarch::rdma

#else

namespace monarch::rdma {
std::unique_ptr<VerbsProvider> makeIbVerbsProvider(QpOptions) {
  return nullptr;
}
} // namespace monarch::rdma

#endif
