//===- RdmaEngineTest.cpp - The engine over loopback verbs and TCP --------===//
//
// Two runtimes in this process (an owner and a requester proc) talk over
// real Unix-socket links; their engines use the loopback fabric's devices,
// so connection exchange, the QP state machine, chunking into work requests,
// the registration cache, error mapping and deadlines run exactly as they
// would above a NIC. The same fixture without devices runs the TCP path.
//
//===----------------------------------------------------------------------===//
#include "RdmaTestPattern.h"

#include "monarch/rdma/LoopbackVerbs.h"
#include "monarch/rdma/RdmaBuffer.h"
#include "monarch/runtime/proc/Runtime.h"

#include <gtest/gtest.h>

namespace monarch::rdma {
namespace {

using namespace std::chrono_literals;
using test::mismatches;
using test::patterned;

const std::string kSecret(32, 's');

std::unique_ptr<Runtime> startRuntime(const std::string &id) {
  RuntimeOptions o;
  o.secret = kSecret;
  o.procId = id;
  auto rt = std::make_unique<Runtime>(o);
  EXPECT_TRUE(rt->start().isOk());
  return rt;
}

/// An owner and a requester engine; `verbs` gives both a loopback device.
struct Procs {
  explicit Procs(bool verbs, RdmaOptions options = {}) {
    options.timeout = 2s;
    ownerRt = startRuntime("owner");
    readerRt = startRuntime("reader");
    std::unique_ptr<VerbsDevice> a, b;
    if (verbs) {
      auto provider = makeLoopbackProvider(fabric);
      a = provider->open("lo0").value();
      b = provider->open("lo1").value();
    }
    owner = std::make_shared<RdmaEngine>(*ownerRt, std::move(a), options);
    reader = std::make_shared<RdmaEngine>(*readerRt, std::move(b), options);
  }
  ~Procs() {
    owner.reset();
    reader.reset();
  }
  Expected<Unit> read(const RdmaHandle &h, void *dst, size_t n,
                      uint64_t offset = 0) {
    return reader->submit({{RdmaOp::Kind::Read, h, offset, dst, n, {}}})
        .get(10s);
  }
  Expected<Unit> write(const RdmaHandle &h, const void *src, size_t n,
                       uint64_t offset = 0) {
    return reader
        ->submit(
            {{RdmaOp::Kind::Write, h, offset, const_cast<void *>(src), n, {}}})
        .get(10s);
  }

  std::shared_ptr<LoopbackFabric> fabric = std::make_shared<LoopbackFabric>(
      std::vector<std::string>{"lo0", "lo1"}, 1u << 20);
  std::unique_ptr<Runtime> ownerRt, readerRt;
  std::shared_ptr<RdmaEngine> owner, reader;
};

TEST(RdmaVerbs, ReadAndWriteGoThroughTheQueuePair) {
  Procs p(true);
  ASSERT_EQ(p.owner->backend(), BackendKind::Ibverbs);
  auto memory = patterned(3u << 20, 1);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok()) << buf.status().toString();
  EXPECT_EQ(buf->handle().device, "lo0");
  EXPECT_NE(buf->handle().rkey, 0u);

  std::vector<uint8_t> dst(memory.size());
  auto before = p.fabric->workRequests();
  auto read = p.read(buf->handle(), dst.data(), dst.size());
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(mismatches(dst.data(), dst.size(), 1), 0u);
  // 3 MiB in work requests of at most the device's 1 MiB.
  EXPECT_EQ(p.fabric->workRequests() - before, 3u);
  // The requester's QP went INIT -> RTR -> RTS after the exchange.
  auto state = p.reader->verbs()->connectionState(p.ownerRt->addr());
  ASSERT_TRUE(state.ok()) << state.status().toString();
  EXPECT_EQ(*state, QpState::Rts);

  auto src = patterned(1000, 2, 5000);
  auto wrote = p.write(buf->handle(), src.data(), src.size(), 5000);
  ASSERT_TRUE(wrote.ok()) << wrote.status().toString();
  EXPECT_EQ(mismatches(memory.data() + 5000, 1000, 2, 5000), 0u);
  EXPECT_EQ(mismatches(memory.data(), 5000, 1), 0u);
  EXPECT_EQ(p.reader->verbs()->connectionCount(), 1u);
}

TEST(RdmaVerbs, ChunkSizeBoundsEachWorkRequest) {
  RdmaOptions o;
  o.verbsChunkBytes = 4096;
  Procs p(true, o);
  auto memory = patterned(10 * 4096 + 1, 3);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> dst(memory.size());
  auto before = p.fabric->workRequests();
  ASSERT_TRUE(p.read(buf->handle(), dst.data(), dst.size()).ok());
  EXPECT_EQ(p.fabric->workRequests() - before, 11u);
  EXPECT_EQ(mismatches(dst.data(), dst.size(), 3), 0u);
}

TEST(RdmaVerbs, WorkBeyondTheSendQueueWaitsForCompletions) {
  RdmaOptions o;
  o.verbsChunkBytes = 1024;
  o.qp.maxSendWr = 4; // the loopback refuses a fifth outstanding request
  Procs p(true, o);
  auto memory = patterned(50 * 1024, 14);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> dst(memory.size());
  auto before = p.fabric->workRequests();
  auto read = p.read(buf->handle(), dst.data(), dst.size());
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(p.fabric->workRequests() - before, 50u);
  EXPECT_EQ(mismatches(dst.data(), dst.size(), 14), 0u);
}

TEST(RdmaVerbs, RegistrationCacheMakesReregistrationFree) {
  Procs p(true);
  auto memory = patterned(1 << 16, 4);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> dst(memory.size());
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(p.read(buf->handle(), dst.data(), dst.size()).ok());
  auto &cache = p.reader->verbs()->cache();
  EXPECT_EQ(cache.misses(), 1u); // dst registered once
  EXPECT_GE(cache.hits(), 4u);
  auto regs = p.fabric->registrations();
  // The owner registering the same memory again is a cache hit too.
  auto again = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(p.fabric->registrations(), regs);
  EXPECT_EQ(again->handle().rkey, buf->handle().rkey);
}

TEST(RdmaVerbs, DroppedBufferIsARemoteAccessErrorAndTheNextOpReconnects) {
  Procs p(true);
  auto memory = patterned(4096, 5);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  RdmaHandle h = buf->handle();
  std::vector<uint8_t> dst(4096);
  ASSERT_TRUE(p.read(h, dst.data(), dst.size()).ok());
  ASSERT_TRUE(buf->drop().isOk());
  auto read = p.read(h, dst.data(), dst.size());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), ErrorCode::NotFound);
  EXPECT_NE(read.status().message().find("remote access error"),
            std::string::npos)
      << read.status().message();
  EXPECT_NE(read.status().message().find("dropped"), std::string::npos);
  // The failed QP is gone; a new buffer works over a new connection.
  auto other = RdmaBuffer::create(p.owner, memory.data(), 2048);
  ASSERT_TRUE(other.ok());
  auto reread = p.read(other->handle(), dst.data(), 2048);
  ASSERT_TRUE(reread.ok()) << reread.status().toString();
  EXPECT_EQ(mismatches(dst.data(), 2048, 5), 0u);
}

TEST(RdmaVerbs, DeadOwnerNicFailsWithClosed) {
  Procs p(true);
  auto memory = patterned(4096, 6);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> dst(4096);
  ASSERT_TRUE(p.read(buf->handle(), dst.data(), dst.size()).ok());
  p.fabric->killDevice("lo0");
  auto read = p.read(buf->handle(), dst.data(), dst.size());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), ErrorCode::Closed);
  EXPECT_NE(read.status().message().find("stopped answering"),
            std::string::npos)
      << read.status().message();
}

TEST(RdmaVerbs, MissingCompletionTimesOutAndTearsTheQueuePairDown) {
  RdmaOptions o;
  Procs p(true, o); // 2 s deadline
  auto memory = patterned(4096, 7);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> dst(4096);
  ASSERT_TRUE(p.read(buf->handle(), dst.data(), dst.size()).ok());
  p.fabric->setStalled(true);
  auto start = std::chrono::steady_clock::now();
  auto read = p.read(buf->handle(), dst.data(), dst.size());
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), ErrorCode::Timeout);
  EXPECT_GE(took, 1900ms);
  EXPECT_LT(took, 5s);
  EXPECT_FALSE(p.reader->verbs()->connectionState(p.ownerRt->addr()).ok());
  p.fabric->setStalled(false);
  ASSERT_TRUE(p.read(buf->handle(), dst.data(), dst.size()).ok());
}

TEST(RdmaVerbs, RequesterWithoutNicFallsBackToTcpForAVerbsHandle) {
  Procs p(true);
  auto memory = patterned(100000, 8);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(buf->handle().hasVerbs());
  RdmaEngine tcpOnly(*p.readerRt, nullptr);
  std::vector<uint8_t> dst(memory.size());
  auto before = p.fabric->workRequests();
  auto read = tcpOnly
                  .submit({{RdmaOp::Kind::Read,
                            buf->handle(),
                            0,
                            dst.data(),
                            dst.size(),
                            {}}})
                  .get(10s);
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(p.fabric->workRequests(), before);
  EXPECT_EQ(mismatches(dst.data(), dst.size(), 8), 0u);
}

TEST(RdmaTcp, ChunksSpreadOverParallelConnections) {
  RdmaOptions o;
  o.chunkBytes = 1000;
  o.lanes = 3;
  Procs p(false, o);
  ASSERT_EQ(p.reader->backend(), BackendKind::Tcp);
  auto memory = patterned(123457, 9);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  EXPECT_FALSE(buf->handle().hasVerbs());
  std::vector<uint8_t> dst(memory.size() - 7);
  ASSERT_TRUE(p.read(buf->handle(), dst.data(), dst.size(), 7).ok());
  EXPECT_EQ(mismatches(dst.data(), dst.size(), 9, 7), 0u);
  auto src = patterned(memory.size(), 10);
  ASSERT_TRUE(p.write(buf->handle(), src.data(), src.size()).ok());
  EXPECT_EQ(mismatches(memory.data(), memory.size(), 10), 0u);
}

TEST(RdmaTcp, ReadOnlyBuffersRefuseWrites) {
  Procs p(false);
  auto memory = patterned(64, 11);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size(),
                                /*writable=*/false);
  ASSERT_TRUE(buf.ok());
  auto wrote = p.write(buf->handle(), memory.data(), 8);
  ASSERT_FALSE(wrote.ok());
  EXPECT_NE(wrote.status().message().find("read-only"), std::string::npos);
  // A forged handle claiming writability is refused by the owner.
  RdmaHandle forged = buf->handle();
  forged.writable = true;
  auto forgedWrite = p.write(forged, memory.data(), 8);
  ASSERT_FALSE(forgedWrite.ok());
  EXPECT_NE(forgedWrite.status().message().find("read-only"),
            std::string::npos);
}

TEST(RdmaTcp, OwnerEngineGoneFailsAtTheDeadline) {
  Procs p(false);
  auto memory = patterned(64, 12);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  RdmaHandle h = buf->handle();
  // The owner's runtime lives on but its RDMA service port is closed:
  // requests go unanswered, so only the deadline can end the wait.
  (void)buf->drop();
  p.owner.reset();
  std::vector<uint8_t> dst(64);
  auto read = p.read(h, dst.data(), dst.size());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), ErrorCode::Timeout);
}

TEST(RdmaTcp, SameProcBufferIsAPlainCopy) {
  Procs p(false);
  auto memory = patterned(5000, 13);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> dst(100);
  auto read =
      p.owner
          ->submit(
              {{RdmaOp::Kind::Read, buf->handle(), 4900, dst.data(), 100, {}}})
          .get(1s);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(mismatches(dst.data(), 100, 13, 4900), 0u);
  // A forged handle claiming more bytes than the region has is refused.
  RdmaHandle forged = buf->handle();
  forged.size = 1 << 20;
  auto outside =
      p.owner->submit({{RdmaOp::Kind::Read, forged, 4990, dst.data(), 100, {}}})
          .get(1s);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), ErrorCode::Invalid);
  ASSERT_TRUE(buf->drop().isOk());
  auto after =
      p.owner
          ->submit(
              {{RdmaOp::Kind::Read, buf->handle(), 0, dst.data(), 100, {}}})
          .get(1s);
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("was dropped"), std::string::npos);
}

TEST(RdmaBufferApi, EmptyMemoryAndDoubleDropAreRefused) {
  Procs p(false);
  auto empty = RdmaBuffer::create(p.owner, nullptr, 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), ErrorCode::Invalid);
  std::vector<uint8_t> memory(8);
  auto buf = RdmaBuffer::create(p.owner, memory.data(), memory.size());
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(p.owner->bufferCount(), 1u);
  ASSERT_TRUE(buf->drop().isOk());
  EXPECT_EQ(p.owner->bufferCount(), 0u);
  auto again = buf->drop();
  ASSERT_FALSE(again.isOk());
  EXPECT_NE(again.message().find("already dropped"), std::string::npos);
}

} // namespace
} // namespace monarch::rdma
