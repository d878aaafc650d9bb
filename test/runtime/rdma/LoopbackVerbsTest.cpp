//===- LoopbackVerbsTest.cpp - The loopback fabric behaves like a NIC -----===//
//
// The engine's verbs tests are only as good as the loopback's fidelity: QPs
// refuse work outside RTS and out-of-order transitions, keys and ranges are
// checked, a dead peer completes with RetryExceeded.
//
//===----------------------------------------------------------------------===//
#include "monarch/rdma/LoopbackVerbs.h"
#include "monarch/rdma/VerbsTransport.h"

#include <gtest/gtest.h>

#include <cstring>

namespace monarch::rdma {
namespace {

struct Pair {
  std::shared_ptr<LoopbackFabric> fabric =
      std::make_shared<LoopbackFabric>(std::vector<std::string>{"a", "b"});
  std::unique_ptr<VerbsProvider> provider = makeLoopbackProvider(fabric);
  std::unique_ptr<VerbsDevice> a = provider->open("a").value();
  std::unique_ptr<VerbsDevice> b = provider->open("b").value();
  uint64_t qa = *a->createQp({});
  uint64_t qb = *b->createQp({});

  void connect() {
    auto ea = *a->localEndpoint(qa);
    auto eb = *b->localEndpoint(qb);
    ASSERT_TRUE(a->modifyToInit(qa).isOk());
    ASSERT_TRUE(b->modifyToInit(qb).isOk());
    ASSERT_TRUE(b->modifyToRtr(qb, ea).isOk());
    ASSERT_TRUE(b->modifyToRts(qb).isOk());
    ASSERT_TRUE(a->modifyToRtr(qa, eb).isOk());
    ASSERT_TRUE(a->modifyToRts(qa).isOk());
  }
  Completion runOne(const WorkRequest &wr) {
    EXPECT_TRUE(a->post(qa, wr).isOk());
    auto got = a->poll(qa, 8);
    EXPECT_TRUE(got.ok());
    EXPECT_EQ(got->size(), 1u);
    return got->empty() ? Completion{} : (*got)[0];
  }
};

TEST(LoopbackVerbs, ListsAndOpensItsDevices) {
  Pair p;
  auto devices = p.provider->devices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1].name, "b");
  auto missing = p.provider->open("mlx5_9");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::NotFound);
}

TEST(LoopbackVerbs, QueuePairWalksResetInitRtrRts) {
  Pair p;
  EXPECT_EQ(*p.a->queryState(p.qa), QpState::Reset);
  WorkRequest wr;
  wr.length = 1;
  auto early = p.a->post(p.qa, wr);
  ASSERT_FALSE(early.isOk());
  EXPECT_NE(early.message().find("RESET, not RTS"), std::string::npos);
  // RTR straight from RESET is refused, as ibv_modify_qp refuses it.
  auto skip = p.a->modifyToRtr(p.qa, *p.b->localEndpoint(p.qb));
  ASSERT_FALSE(skip.isOk());
  EXPECT_NE(skip.message().find("RESET to RTR"), std::string::npos);
  p.connect();
  EXPECT_EQ(*p.a->queryState(p.qa), QpState::Rts);
  EXPECT_EQ(*p.b->queryState(p.qb), QpState::Rts);
}

TEST(LoopbackVerbs, ReadAndWriteMoveBytesBetweenRegions) {
  Pair p;
  p.connect();
  std::vector<uint8_t> local(64, 0), remote(64);
  for (size_t i = 0; i < remote.size(); ++i)
    remote[i] = static_cast<uint8_t>(i);
  auto lk = *p.a->registerMemory(local.data(), local.size(), kLocalWrite);
  auto rk = *p.b->registerMemory(remote.data(), remote.size(),
                                 kRemoteRead | kRemoteWrite);
  WorkRequest wr{7,
                 WorkOp::Read,
                 reinterpret_cast<uint64_t>(local.data()),
                 lk.lkey,
                 reinterpret_cast<uint64_t>(remote.data() + 8),
                 rk.rkey,
                 16};
  auto c = p.runOne(wr);
  EXPECT_EQ(c.wrId, 7u);
  EXPECT_EQ(c.status, WcStatus::Success);
  EXPECT_EQ(std::memcmp(local.data(), remote.data() + 8, 16), 0);

  local[0] = 0xEE;
  wr.op = WorkOp::Write;
  wr.remoteAddr = reinterpret_cast<uint64_t>(remote.data() + 60);
  wr.length = 4;
  EXPECT_EQ(p.runOne(wr).status, WcStatus::Success);
  EXPECT_EQ(remote[60], 0xEE);
}

TEST(LoopbackVerbs, KeysRangesAndRightsAreChecked) {
  Pair p;
  p.connect();
  std::vector<uint8_t> local(64), remote(64);
  auto lk = *p.a->registerMemory(local.data(), local.size(), kLocalWrite);
  auto ro = *p.b->registerMemory(remote.data(), remote.size(), kRemoteRead);
  auto base = reinterpret_cast<uint64_t>(remote.data());
  WorkRequest wr{
      1,       WorkOp::Read, reinterpret_cast<uint64_t>(local.data()),
      lk.lkey, base + 32,    ro.rkey,
      33};
  EXPECT_EQ(p.runOne(wr).status, WcStatus::RemoteAccess); // past the end
  wr.length = 32;
  EXPECT_EQ(p.runOne(wr).status, WcStatus::Success);
  wr.op = WorkOp::Write; // read-only region
  EXPECT_EQ(p.runOne(wr).status, WcStatus::RemoteAccess);
  wr.op = WorkOp::Read;
  wr.rkey = lk.lkey; // a key of the wrong device
  EXPECT_EQ(p.runOne(wr).status, WcStatus::RemoteAccess);
  wr.rkey = ro.rkey;
  wr.lkey = 999;
  EXPECT_EQ(p.runOne(wr).status, WcStatus::LocalProtection);
  wr.lkey = lk.lkey;
  ASSERT_TRUE(p.b->deregisterMemory(ro.handle).isOk());
  EXPECT_EQ(p.runOne(wr).status, WcStatus::RemoteAccess);
}

TEST(LoopbackVerbs, DeadPeerCompletesWithRetryExceeded) {
  Pair p;
  p.connect();
  std::vector<uint8_t> local(8), remote(8);
  auto lk = *p.a->registerMemory(local.data(), 8, kLocalWrite);
  auto rk = *p.b->registerMemory(remote.data(), 8, kRemoteRead);
  p.fabric->killDevice("b");
  WorkRequest wr{1,
                 WorkOp::Read,
                 reinterpret_cast<uint64_t>(local.data()),
                 lk.lkey,
                 reinterpret_cast<uint64_t>(remote.data()),
                 rk.rkey,
                 8};
  EXPECT_EQ(p.runOne(wr).status, WcStatus::RetryExceeded);
}

TEST(VerbsErrors, CompletionStatusesMapToClearErrors) {
  RdmaHandle h;
  h.ownerAddr = "unix:/x";
  h.bufferId = 4;
  h.size = 10;
  auto dropped = completionError(WcStatus::RemoteAccess, h, "");
  EXPECT_EQ(dropped.code(), ErrorCode::NotFound);
  EXPECT_NE(dropped.message().find("dropped"), std::string::npos);
  EXPECT_NE(dropped.message().find("RDMA buffer 4"), std::string::npos);
  EXPECT_EQ(completionError(WcStatus::RetryExceeded, h, "").code(),
            ErrorCode::Closed);
  EXPECT_EQ(completionError(WcStatus::Flushed, h, "").code(),
            ErrorCode::Closed);
  EXPECT_EQ(completionError(WcStatus::RemoteInvalid, h, "").code(),
            ErrorCode::Invalid);
  auto other = completionError(WcStatus::Other, h, "vendor 0x81");
  EXPECT_EQ(other.code(), ErrorCode::Internal);
  EXPECT_NE(other.message().find("vendor 0x81"), std::string::npos);
  EXPECT_TRUE(completionError(WcStatus::Success, h, "").isOk());
}

} // namespace
} // namespace monarch::rdma
