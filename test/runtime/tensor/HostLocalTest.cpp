//===- HostLocalTest.cpp - Small all-gathers through shared memory --------===//
//
// The host-local backend (lib/collectives/HostLocal.cpp) over Gloo: members
// on one host (here: threads of one process, each with its own backends, as
// separate processes would have) get their small all-gathers -- to_mesh's
// control step -- through one shared page, never through Gloo, round after
// round; larger ones and everything else still go to Gloo; an abort fails
// an all-gather waiting on a member that never comes; and no shared memory
// is left behind.
//
//===----------------------------------------------------------------------===//

#include "CountingBackend.h"
#include "monarch/tensor/Collectives.h"
#include "monarch/tensor/TempDir.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <future>
#include <numeric>
#include <unistd.h>

using namespace monarch::tensor;
using monarch::tensor::testing::CallCounts;
using monarch::tensor::testing::CountingBackend;
namespace plan = monarch::plan;

namespace {

/// Shared memory objects of this process's host-local pages in /dev/shm.
int pagesLeft() {
  int n = 0;
  std::string mine = "monarch-coll-" + std::to_string(::getpid()) + "-";
  if (DIR *d = ::opendir("/dev/shm")) {
    while (dirent *e = ::readdir(d))
      n += std::string(e->d_name).rfind(mine, 0) == 0;
    ::closedir(d);
  }
  return n;
}

/// Runs `fn(rank, communicator, counts of what reached Gloo)` on `n`
/// threads, each with its own backends, all rendezvousing in one directory.
template <typename Fn> void onRanks(int n, Fn fn) {
  TempDir tmp("host-local");
  std::string dir = tmp.path();
  std::vector<std::future<void>> done;
  for (int r = 0; r < n; ++r)
    done.push_back(std::async(std::launch::async, [=] {
      auto store = std::make_shared<FileStore>(dir);
      GlooOptions o;
      o.timeout = std::chrono::seconds(20);
      auto gloo = std::make_shared<CountingBackend>(makeGlooBackend(store, o));
      auto backend =
          makeHostLocalBackend(gloo, store, std::chrono::seconds(20));
      std::vector<int64_t> ranks(n);
      std::iota(ranks.begin(), ranks.end(), 0);
      auto comm = backend->connect("test", ranks, r);
      ASSERT_TRUE(comm.ok()) << comm.status().message();
      fn(r, *comm.value(), gloo->counts);
    }));
  for (auto &f : done)
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
}

TEST(HostLocal, SmallAllGathersGoThroughSharedMemoryTheRestThroughGloo) {
  onRanks(3, [](int r, Communicator &c, CallCounts &gloo) {
    // More rounds than buffers, each member's part changing every round.
    for (int64_t round = 0; round < 500; ++round) {
      std::vector<int64_t> in{r, round, r * round}, out(9, -1);
      ASSERT_TRUE(
          c.allgather({in.data(), 3, plan::INT64}, {out.data(), 9, plan::INT64})
              .isOk());
      for (int64_t m = 0; m < 3; ++m) {
        EXPECT_EQ(out[3 * m], m);
        EXPECT_EQ(out[3 * m + 1], round);
        ASSERT_EQ(out[3 * m + 2], m * round) << "round " << round;
      }
    }
    EXPECT_EQ(gloo.allgathers.load(), 0);
    // 100 bytes a member: through Gloo.
    std::vector<float> big(25, float(r)), all(75);
    ASSERT_TRUE(c.allgather({big.data(), 25, plan::FLOAT32},
                            {all.data(), 75, plan::FLOAT32})
                    .isOk());
    for (int m = 0; m < 3; ++m)
      EXPECT_EQ(all[25 * m + 24], float(m));
    EXPECT_EQ(gloo.allgathers.load(), 1);
    std::vector<int64_t> sum{r + 1};
    ASSERT_TRUE(c.allreduce({sum.data(), 1, plan::INT64}, ReduceKind::Sum)
                    .isOk());
    EXPECT_EQ(sum[0], 6);
  });
  EXPECT_EQ(pagesLeft(), 0);
}

TEST(HostLocal, AbortFailsAnAllGatherWaitingOnAMember) {
  std::promise<void> waiting;
  std::shared_future<void> rank0Waiting = waiting.get_future().share();
  std::promise<void> finished;
  std::shared_future<void> rank0Done = finished.get_future().share();
  onRanks(2, [&](int r, Communicator &c, CallCounts &) {
    if (r == 1) { // connected, but never takes part: stays until rank 0
      rank0Done.wait(); // is done, which only the abort can make it
      return;
    }
    std::vector<int64_t> in{1}, out(2);
    auto start = std::chrono::steady_clock::now();
    std::thread aborter([&] {
      rank0Waiting.wait();
      c.abort();
    });
    waiting.set_value();
    Status s = c.allgather({in.data(), 1, plan::INT64},
                           {out.data(), 2, plan::INT64});
    finished.set_value();
    aborter.join();
    // Not the timeout's "did not arrive": the abort's.
    EXPECT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("aborted"), std::string::npos) << s.message();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(10));
  });
  EXPECT_EQ(pagesLeft(), 0);
}

TEST(HostLocal, PagesOfKilledProcessesAreRemovedByTheNextOne) {
  // A page whose maker died before its members mapped it (a pid that is
  // gone: a child that exited) is unlinked when the next page is made; a
  // live process's is kept.
  pid_t child = ::fork();
  if (child == 0)
    std::_Exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  std::string stale = "/monarch-coll-" + std::to_string(child) + "-0-1";
  std::string live = "/monarch-coll-" + std::to_string(::getpid()) + "-99-1";
  for (const std::string &name : {stale, live}) {
    int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  onRanks(2, [](int, Communicator &c, CallCounts &) {
    std::vector<int32_t> in{1}, out(2);
    ASSERT_TRUE(c.allgather({in.data(), 1, plan::INT32},
                            {out.data(), 2, plan::INT32})
                    .isOk());
  });
  EXPECT_NE(::shm_unlink(stale.c_str()), 0) << "the stale page is still there";
  EXPECT_EQ(::shm_unlink(live.c_str()), 0) << "the live page was removed";
}

} // namespace
