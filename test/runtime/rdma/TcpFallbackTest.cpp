//===- TcpFallbackTest.cpp - RDMA over TCP between worker processes -------===//
//
// Real monarch-worker processes own buffers (RdmaOwner in
// monarch_rdma_test_actors); the test process and other workers read and
// write them. No RDMA NIC is used: MONARCH_RDMA_BACKEND is left alone, so on
// a machine without one this is the automatic fallback.
//
//===----------------------------------------------------------------------===//
#include "RdmaTestPattern.h"

#include "monarch/rdma/RdmaBuffer.h"
#include "monarch/runtime/Monarch.h"

#include <gtest/gtest.h>

#include <csignal>
#include <thread>

namespace monarch::test {
namespace {

using namespace std::chrono_literals;
using rdma::RdmaHandle;

class TcpFallback : public testing::Test {
protected:
  static void SetUpTestSuite() {
    setRootSupervisionHandler([](const SupervisionEvent &) {});
    SpawnProcsOptions options;
    options.name = "rdma";
    options.actorLibraries = {MONARCH_RDMA_TEST_ACTORS_LIB};
    auto spawned = thisHost().spawnProcs({{"owner", 2}}, options);
    ASSERT_TRUE(spawned.ok()) << spawned.status().toString();
    procs = std::make_unique<ProcMesh>(std::move(*spawned));
    auto actors = procs->spawn("owners", "RdmaOwner");
    ASSERT_TRUE(actors.ok()) << actors.status().toString();
    owners = std::make_unique<ActorMesh>(std::move(*actors));
  }
  static void TearDownTestSuite() {
    owners.reset();
    if (procs)
      (void)procs->stop();
    procs.reset();
  }
  void SetUp() override {
    if (!owners)
      GTEST_SKIP() << "spawning the owners failed";
  }
  static ActorMesh owner(int rank) {
    auto one = owners->slice("owner", rank);
    EXPECT_TRUE(one.ok()) << one.status().toString();
    return std::move(*one);
  }
  static RdmaHandle alloc(int rank, int64_t size, int64_t seed) {
    auto h = owner(rank).callOne<RdmaHandle>("alloc", size, seed).get(60s);
    EXPECT_TRUE(h.ok()) << h.status().toString();
    return h.ok() ? *h : RdmaHandle{};
  }
  /// Reads the whole buffer into this process, then writes a new pattern
  /// over it and checks it on the owner.
  static void roundTrip(size_t size) {
    RdmaHandle h = alloc(0, static_cast<int64_t>(size), 3);
    ASSERT_EQ(h.size, size);
    std::vector<uint8_t> dst(size);
    auto read = rdma::readInto(h, dst.data(), size).get(60s);
    ASSERT_TRUE(read.ok()) << read.status().toString();
    EXPECT_EQ(mismatches(dst.data(), size, 3), 0u);
    // The destination's pages are already touched: refill it in place as
    // the source (fresh gigabytes cost seconds of page faults here).
    fillPattern(dst.data(), size, 9);
    auto wrote = rdma::writeFrom(h, dst.data(), size).get(60s);
    ASSERT_TRUE(wrote.ok()) << wrote.status().toString();
    auto bad =
        owner(0)
            .callOne<int64_t>("mismatches", int64_t{9}, int64_t{0}, int64_t{0})
            .get(60s);
    ASSERT_TRUE(bad.ok()) << bad.status().toString();
    EXPECT_EQ(*bad, 0);
  }
  static std::unique_ptr<ProcMesh> procs;
  static std::unique_ptr<ActorMesh> owners;
};
std::unique_ptr<ProcMesh> TcpFallback::procs;
std::unique_ptr<ActorMesh> TcpFallback::owners;

TEST_F(TcpFallback, ReportsTheTcpBackend) {
  auto backend = owner(0).callOne<std::string>("backend").get(10s);
  ASSERT_TRUE(backend.ok()) << backend.status().toString();
  EXPECT_EQ(*backend, "tcp");
  EXPECT_EQ(rdma::RdmaEngine::processBackend(), rdma::BackendKind::Tcp);
}

TEST_F(TcpFallback, ReadWriteOneByte) { roundTrip(1); }
TEST_F(TcpFallback, ReadWrite4KiB) { roundTrip(4096); }
TEST_F(TcpFallback, ReadWrite1MiB) { roundTrip(1 << 20); }
TEST_F(TcpFallback, ReadWrite64MiB) { roundTrip(64u << 20); }
TEST_F(TcpFallback, ReadWrite1GiB) { roundTrip(1u << 30); }

// Memory only the owner can reach (a GPU's) through its host copy: each
// read is served from a refreshed copy, each write ends in the memory.
TEST_F(TcpFallback, StagedMemoryIsReadFreshAndWrittenThrough) {
  constexpr size_t size = 3 << 20; // several chunks
  auto h = owner(0).callOne<RdmaHandle>("allocStaged", int64_t{size},
                                        int64_t{5}).get(60s);
  ASSERT_TRUE(h.ok()) << h.status().toString();
  EXPECT_FALSE(h->hasVerbs()) << "a NIC would read the host copy unrefreshed";
  std::vector<uint8_t> dst(size);
  auto read = rdma::readInto(*h, dst.data(), size).get(60s);
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(mismatches(dst.data(), size, 5), 0u) << "served an unrefreshed copy";
  // A range of it, at an offset.
  std::vector<uint8_t> part(4096);
  read = rdma::readInto(*h, part.data(), part.size(), 12345).get(60s);
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(mismatches(part.data(), part.size(), 5, 12345), 0u);
  fillPattern(dst.data(), size, 11);
  auto wrote = rdma::writeFrom(*h, dst.data(), size).get(60s);
  ASSERT_TRUE(wrote.ok()) << wrote.status().toString();
  auto bad = owner(0).callOne<int64_t>("deviceMismatches", int64_t{11}).get(60s);
  ASSERT_TRUE(bad.ok()) << bad.status().toString();
  EXPECT_EQ(*bad, 0) << "the write stopped in the host copy";
}

TEST_F(TcpFallback, OffsetsReadAndWriteTheirRangeOnly) {
  const size_t size = 3 * 4096 + 17;
  RdmaHandle h = alloc(0, size, 5);
  std::vector<uint8_t> part(1000);
  auto read = rdma::readInto(h, part.data(), part.size(), 4099).get(10s);
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(mismatches(part.data(), part.size(), 5, 4099), 0u);

  auto src = patterned(333, 11, 8000);
  ASSERT_TRUE(rdma::writeFrom(h, src.data(), src.size(), 8000).get(10s).ok());
  // Inside [8000, 8333) the new pattern, elsewhere the old one.
  auto outside = owner(0)
                     .callOne<int64_t>("mismatches", int64_t{5}, int64_t{8000},
                                       int64_t{8333})
                     .get(10s);
  ASSERT_TRUE(outside.ok());
  EXPECT_EQ(*outside, 0);
  auto inside =
      owner(0).callOne<Blob>("bytes", int64_t{8000}, int64_t{333}).get(10s);
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(mismatches(inside->buffer.data(), 333, 11, 8000), 0u);

  // Past the end: refused before anything is sent.
  auto past = rdma::readInto(h, part.data(), 1000, size - 999).get(10s);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), ErrorCode::Invalid);
  EXPECT_NE(past.status().message().find("exceeds"), std::string::npos)
      << past.status().message();
}

TEST_F(TcpFallback, ConcurrentTransfersToTwoOwners) {
  const size_t size = 8u << 20;
  RdmaHandle a = alloc(0, size, 21);
  RdmaHandle b = alloc(1, size, 22);
  std::vector<std::vector<uint8_t>> dsts(8, std::vector<uint8_t>(size / 4));
  std::vector<Future<Unit>> pending;
  for (size_t i = 0; i < 8; ++i) {
    const RdmaHandle &h = i % 2 ? b : a;
    pending.push_back(
        rdma::readInto(h, dsts[i].data(), size / 4, (i / 2) * (size / 4)));
  }
  // Writes to one owner's second half while reads of the first run.
  auto src = patterned(size / 2, 23, size / 2);
  pending.push_back(rdma::writeFrom(a, src.data(), src.size(), size / 2));
  for (auto &f : pending) {
    auto done = f.get(30s);
    ASSERT_TRUE(done.ok()) << done.status().toString();
  }
  for (size_t i = 0; i < 8; ++i) {
    size_t from = (i / 2) * (size / 4);
    // Reads of a's second half may see either pattern; the rest is fixed.
    if (i % 2 == 0 && from >= size / 2)
      continue;
    EXPECT_EQ(mismatches(dsts[i].data(), size / 4, i % 2 ? 22 : 21, from), 0u)
        << "read " << i;
  }
  auto bad = owner(0)
                 .callOne<int64_t>("mismatches", int64_t{21},
                                   static_cast<int64_t>(size / 2),
                                   static_cast<int64_t>(size))
                 .get(10s);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(*bad, 0);
}

TEST_F(TcpFallback, BatchSubmitsSeveralOperationsAtOnce) {
  RdmaHandle a = alloc(0, 1 << 20, 31);
  RdmaHandle b = alloc(1, 1 << 20, 32);
  std::vector<uint8_t> fromA(4096), fromB(4096);
  auto src = patterned(4096, 33, 0);
  std::vector<rdma::RdmaOp> ops(3);
  ops[0] = {rdma::RdmaOp::Kind::Read, a, 0, fromA.data(), fromA.size(), {}};
  ops[1] = {rdma::RdmaOp::Kind::Read, b, 65536, fromB.data(), fromB.size(), {}};
  ops[2] = {rdma::RdmaOp::Kind::Write, b, 0, src.data(), src.size(), {}};
  auto done = rdma::submit(ops).get(10s);
  ASSERT_TRUE(done.ok()) << done.status().toString();
  EXPECT_EQ(mismatches(fromA.data(), 4096, 31), 0u);
  EXPECT_EQ(mismatches(fromB.data(), 4096, 32, 65536), 0u);
  auto head =
      owner(1).callOne<Blob>("bytes", int64_t{0}, int64_t{4096}).get(10s);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(mismatches(head->buffer.data(), 4096, 33), 0u);

  // One bad operation fails the batch before anything moves.
  ops[2].remoteOffset = (1 << 20) - 10;
  auto refused = rdma::submit(ops).get(10s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::Invalid);
}

TEST_F(TcpFallback, WorkerReadsAnotherWorkersBuffer) {
  const size_t size = 5u << 20;
  RdmaHandle h = alloc(1, size, 41);
  auto bad =
      owner(0)
          .callOne<int64_t>("readAndCheck", h, int64_t{12345},
                            static_cast<int64_t>(size - 12345), int64_t{41})
          .get(30s);
  ASSERT_TRUE(bad.ok()) << bad.status().toString();
  EXPECT_EQ(*bad, 0);
}

TEST_F(TcpFallback, DroppedBufferGivesAClearError) {
  RdmaHandle h = alloc(1, 4096, 51);
  auto dropped = owner(1).callOne<std::string>("drop").get(10s);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, "Ok");
  std::vector<uint8_t> dst(4096);
  auto read = rdma::readInto(h, dst.data(), dst.size()).get(10s);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), ErrorCode::NotFound);
  EXPECT_NE(read.status().message().find("was dropped"), std::string::npos)
      << read.status().message();
  auto write = rdma::writeFrom(h, dst.data(), dst.size()).get(10s);
  ASSERT_FALSE(write.ok());
  EXPECT_NE(write.status().message().find("was dropped"), std::string::npos);
  // A second drop is refused too.
  auto again = owner(1).callOne<std::string>("drop").get(10s);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->find("already dropped"), std::string::npos) << *again;
}

// Runs last (gtest keeps file order): it kills owner 1.
TEST_F(TcpFallback, OwnerKilledMidTransferFailsTheFuture) {
  const size_t size = 256u << 20;
  RdmaHandle h = alloc(1, size, 61);
  auto pid = owner(1).callOne<int64_t>("pid").get(10s);
  ASSERT_TRUE(pid.ok());
  std::vector<uint8_t> dst(size);
  auto start = std::chrono::steady_clock::now();
  auto read = rdma::readInto(h, dst.data(), size);
  ASSERT_EQ(::kill(static_cast<pid_t>(*pid), SIGKILL), 0);
  auto outcome = read.get(20s);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(outcome.ok()) << "the read finished before the kill landed";
  EXPECT_EQ(outcome.status().code(), ErrorCode::Closed)
      << outcome.status().toString();
  EXPECT_NE(outcome.status().message().find("went away"), std::string::npos)
      << outcome.status().message();
  EXPECT_LT(took, 5s);
}

} // namespace
} // namespace monarch::test
