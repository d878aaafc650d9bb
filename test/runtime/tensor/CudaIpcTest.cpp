//===- CudaIpcTest.cpp - Same-GPU transfers between processes -------------===//
//
// Two processes on one GPU connect a CUDA-backend communicator (as the
// pipeline job's stages on a one-GPU machine do): its point-to-point
// transfers must move device to device through CUDA IPC rings, never
// through the host backend, in order, chunked when larger than a slot, with
// the sender's later writes not reaching what was sent; a receive that does
// not match the send, and a sender that went away, fail at the call. Each
// rank is a forked child that touches CUDA only after the fork; a child that
// finds no GPU exits 77 and the test skips.
//
//===----------------------------------------------------------------------===//

#include "CountingBackend.h"
#include "monarch/tensor/Collectives.h"
#include "monarch/tensor/TempDir.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <dirent.h>
#include <functional>
#include <numeric>
#include <sys/wait.h>
#include <unistd.h>

using namespace monarch::tensor;
using monarch::tensor::testing::CountingBackend;
namespace plan = monarch::plan;

namespace {

constexpr int kNoGpu = 77;

/// What one rank's body sees.
struct Rank {
  int rank;
  Communicator &comm;
  cudaStream_t stream;
  CountingBackend &host;
};

/// A check inside a child: prints and exits 1 when false.
#define CHILD_CHECK(cond, what)                                                \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "rank check failed: %s (%s:%d)\n",                  \
                   std::string(what).c_str(), __FILE__, __LINE__);             \
      std::_Exit(1);                                                           \
    }                                                                          \
  } while (0)

#define CHILD_OK(status)                                                       \
  do {                                                                         \
    Status s_ = (status);                                                      \
    CHILD_CHECK(s_.isOk(), s_.message());                                      \
  } while (0)

/// A device buffer of `n` floats, value(i) = base + i.
float *deviceIota(size_t n, float base, cudaStream_t stream) {
  std::vector<float> host(n);
  std::iota(host.begin(), host.end(), base);
  void *d = nullptr;
  CHILD_CHECK(cudaMalloc(&d, n * sizeof(float) + 1) == cudaSuccess, "malloc");
  CHILD_CHECK(cudaMemcpyAsync(d, host.data(), n * sizeof(float),
                              cudaMemcpyHostToDevice, stream) == cudaSuccess,
              "upload");
  CHILD_CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");
  return static_cast<float *>(d);
}

/// Whether device `d` holds base, base + 1, ... (n floats).
bool holdsIota(const float *d, size_t n, float base, cudaStream_t stream) {
  std::vector<float> host(n);
  if (cudaMemcpyAsync(host.data(), d, n * sizeof(float),
                      cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (host[i] != base + float(i))
      return false;
  return true;
}

Buffer floats(float *d, size_t n) { return {d, n, plan::FLOAT32}; }

/// Forks two ranks that connect one CUDA-backend communicator on GPU 0 and
/// run `body`; returns each child's exit status (kNoGpu: no GPU).
std::vector<int> onTwoProcesses(std::chrono::milliseconds timeout,
                                std::function<void(Rank &)> body,
                                std::vector<pid_t> *pids = nullptr) {
  TempDir tmp("cuda-ipc");
  std::string dir = tmp.path();
  std::vector<pid_t> children;
  for (int r = 0; r < 2; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int devices = 0;
      if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
        std::_Exit(kNoGpu);
      CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "set device");
      cudaStream_t stream;
      CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ==
                      cudaSuccess,
                  "stream");
      auto store = std::make_shared<FileStore>(dir);
      GlooOptions o;
      o.timeout = timeout;
      auto host =
          std::make_shared<CountingBackend>(makeGlooBackend(store, o));
      auto backend = makeCudaBackend(store, host, timeout);
      CHILD_CHECK(backend != nullptr, "built without NCCL");
      {
        auto comm = backend->connectOn("ipc", {0, 1}, r, {stream, 0});
        CHILD_OK(comm.status());
        Rank me{r, *comm.value(), stream, *host};
        body(me);
      }
      std::fflush(stderr);
      std::_Exit(0);
    }
    children.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status)
                                      : 128 + WTERMSIG(status));
  }
  if (pids)
    *pids = children;
  return codes;
}

#define EXPECT_RANKS_OK(codes)                                                 \
  do {                                                                         \
    auto c_ = (codes);                                                         \
    if (c_[0] == kNoGpu || c_[1] == kNoGpu)                                    \
      GTEST_SKIP() << "no CUDA device";                                        \
    EXPECT_EQ(c_[0], 0) << "rank 0";                                           \
    EXPECT_EQ(c_[1], 0) << "rank 1";                                           \
  } while (0)

/// Shared memory objects of these processes still in /dev/shm.
std::vector<std::string> leftInDevShm(const std::vector<pid_t> &pids) {
  std::vector<std::string> left;
  DIR *d = ::opendir("/dev/shm");
  if (!d)
    return left;
  while (dirent *e = ::readdir(d))
    for (pid_t p : pids)
      if (std::string(e->d_name).rfind(
              "monarch-ipc-" + std::to_string(p) + "-", 0) == 0)
        left.push_back(e->d_name);
  ::closedir(d);
  return left;
}

TEST(CudaIpc, TransfersMoveDeviceToDeviceWithoutTheHost) {
  std::vector<pid_t> pids;
  auto codes = onTwoProcesses(
      std::chrono::seconds(30),
      [](Rank &me) {
        // 5M floats: 20 MB, five slots' worth; then more small transfers
        // than the ring has slots, sent before the receiver takes any.
        const size_t big = 5'000'000;
        const int small = 20;
        if (me.rank == 0) {
          float *x = deviceIota(big, 1, me.stream);
          CHILD_OK(me.comm.sendRecv({{floats(x, big), 1}}, {}, 1));
          // A write after the send, on the same stream, is not sent.
          CHILD_CHECK(cudaMemsetAsync(x, 0, big * sizeof(float), me.stream) ==
                          cudaSuccess,
                      "memset");
          for (int i = 0; i < small; ++i) {
            float *s = deviceIota(size_t(i), 1000.f * i, me.stream);
            CHILD_OK(me.comm.sendRecv({{floats(s, size_t(i)), 1}}, {}, 2 + i));
          }
        } else {
          float *y = deviceIota(big, -1, me.stream);
          CHILD_OK(me.comm.sendRecv({}, {{floats(y, big), 0}}, 1));
          CHILD_CHECK(holdsIota(y, big, 1, me.stream), "the big transfer");
          for (int i = 0; i < small; ++i) {
            float *r = deviceIota(size_t(i), -5, me.stream);
            CHILD_OK(me.comm.sendRecv({}, {{floats(r, size_t(i)), 0}}, 2 + i));
            CHILD_CHECK(holdsIota(r, size_t(i), 1000.f * i, me.stream),
                        "small transfer " + std::to_string(i));
          }
        }
        // Both ways in one call, each larger than the whole ring.
        const size_t both = 9'000'000;
        float *mine = deviceIota(both, 10.f * me.rank, me.stream);
        float *theirs = deviceIota(both, -1, me.stream);
        int peer = 1 - me.rank;
        CHILD_OK(me.comm.sendRecv({{floats(mine, both), peer}},
                                  {{floats(theirs, both), peer}}, 100));
        CHILD_CHECK(holdsIota(theirs, both, 10.f * peer, me.stream),
                    "the exchange");
        CHILD_CHECK(me.host.counts.sendRecvs.load() == 0,
                    std::to_string(me.host.counts.sendRecvs.load()) +
                        " transfers went through the host");
      },
      &pids);
  EXPECT_RANKS_OK(codes);
  EXPECT_EQ(leftInDevShm(pids), std::vector<std::string>{});
}

TEST(CudaIpc, AReceiveThatDoesNotMatchTheSendFails) {
  auto codes = onTwoProcesses(std::chrono::seconds(30), [](Rank &me) {
    if (me.rank == 0) {
      float *x = deviceIota(10, 0, me.stream);
      CHILD_OK(me.comm.sendRecv({{floats(x, 10), 1}}, {}, 5));
    } else {
      float *y = deviceIota(12, 0, me.stream);
      Status s = me.comm.sendRecv({}, {{floats(y, 12), 0}}, 5);
      CHILD_CHECK(!s.isOk(), "a 12-float receive of a 10-float send passed");
      CHILD_CHECK(s.message().find("is not the receive posted") !=
                      std::string::npos,
                  s.message());
    }
  });
  EXPECT_RANKS_OK(codes);
}

TEST(CudaIpc, AReceiveFromASenderThatClosedFailsBeforeTheTimeout) {
  auto codes = onTwoProcesses(std::chrono::seconds(60), [](Rank &me) {
    float *b = deviceIota(4, 0, me.stream);
    // One transfer, so both ends are open; then rank 0 leaves (its
    // communicator goes when the body returns).
    CHILD_OK(me.rank == 0 ? me.comm.sendRecv({{floats(b, 4), 1}}, {}, 1)
                          : me.comm.sendRecv({}, {{floats(b, 4), 0}}, 1));
    if (me.rank == 1) {
      auto start = std::chrono::steady_clock::now();
      Status s = me.comm.sendRecv({}, {{floats(b, 4), 0}}, 2);
      auto took = std::chrono::steady_clock::now() - start;
      CHILD_CHECK(!s.isOk(), "a receive from a closed sender passed");
      CHILD_CHECK(s.message().find("closed its end") != std::string::npos,
                  s.message());
      CHILD_CHECK(took < std::chrono::seconds(30), "it waited for the timeout");
    }
  });
  EXPECT_RANKS_OK(codes);
}

} // namespace
