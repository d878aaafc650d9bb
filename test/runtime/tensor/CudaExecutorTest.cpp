//===- CudaExecutorTest.cpp - The executor with CUDA tensors on one GPU ---===//
//
// The executor suite's substance with CUDA tensors on a 1-rank mesh (DESIGN.md
// §5, §6.4): ATen ops on cuda, a CUDA stream per plan stream with kernels of
// two streams overlapping, borrows ordered by CUDA events (checked by value:
// without the events the other stream would read stale data), reduce and
// stack through NCCL with a single rank, to_mesh, recordings, fetch of cuda
// values, errors, the memory cap (CPU only), and device-time trace events.
// Every test skips, saying why, without a GPU or with a CPU-only torch.
//
// The event tests make the race visible: the producing stream first queues
// ~100 ms of matrix products, so a consumer that ordered only on the host
// (the host side of a stream finishes launching long before the GPU runs the
// kernels) would read the value before it is written.
//
//===----------------------------------------------------------------------===//

#include "ExecutorHarness.h"

#include "monarch/tensor/Executor.h"
#include "monarch/tensor/Functions.h"
#include "monarch/tensor/Plan.h"
#include "monarch/tensor/PlanBuilder.h"
#include "monarch/tensor/TempDir.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

using namespace monarch::tensor;
using namespace monarch::tensor::testing;
namespace plan = monarch::plan;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

bool haveGpu() {
  return at::hasCUDA() && at::detail::getCUDAHooks().getNumGPUs() > 0;
}

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    if (!haveGpu())                                                            \
      GTEST_SKIP() << "needs a GPU and a torch built with CUDA (this torch: "  \
                   << (at::hasCUDA() ? "CUDA, but no GPU" : "CPU-only")        \
                   << ")";                                                     \
  } while (0)

const std::vector<std::pair<std::string, plan::Value>> onCuda = {
    {"device", val::device("cuda")}};

/// The executor harness on a 1-rank mesh, with waits long enough for GPU
/// start-up.
struct CudaHarness : Harness {
  explicit CudaHarness(ExecutorOptions options = {}, bool trace = false)
      : Harness(withOneRank(std::move(options)), trace, seconds(30)) {}
  static ExecutorOptions withOneRank(ExecutorOptions options) {
    options.rootShape = {{"x", 1}};
    return options;
  }
  /// Runs a warm-up plan (cuBLAS initialization, kernel loading: host work
  /// of the first launches) and forgets its trace events. Its plan ends
  /// with a status, before which a stream reports all its device spans.
  void warmUp(PlanBuilder &w) {
    run(w);
    ASSERT_TRUE(failures.empty()) << allFailures();
    std::lock_guard<std::mutex> lock(mutex);
    traces.clear();
  }
};

// The current CUDA stream and device of the calling stream thread, through
// c10's device-generic guard (no CUDA headers needed here).
RegisterFunction currentStream("cuda_test.current_stream", [](const auto &) {
  c10::impl::VirtualGuardImpl impl(c10::kCUDA);
  c10::Device d = impl.getDevice();
  c10::Stream s = impl.getStream(d);
  return std::vector<at::Tensor>{at::scalar_tensor(s.id(), at::kLong),
                                 at::scalar_tensor(d.index(), at::kLong)};
});

std::mutex flagMutex;
std::condition_variable flagCv;
bool flag = false;

RegisterFunction waitFlag("cuda_test.wait_flag", [](const auto &) {
  std::unique_lock<std::mutex> lock(flagMutex);
  if (!flagCv.wait_for(lock, seconds(20), [] { return flag; }))
    throw std::runtime_error("flag never set");
  return std::vector<at::Tensor>{};
});
RegisterFunction setFlag("cuda_test.set_flag", [](const auto &) {
  {
    std::lock_guard<std::mutex> lock(flagMutex);
    flag = true;
  }
  flagCv.notify_all();
  return std::vector<at::Tensor>{};
});

/// Queues about `n` x 2.7 ms (fp32 4096^3 products on an H200) of kernels
/// on `stream`, freeing what it made.
void busyGpu(PlanBuilder &b, int64_t stream, int n) {
  int64_t m =
      b.op(0, "aten::randn", "", {val::ints({4096, 4096})}, 1, stream, onCuda);
  for (int k = 0; k < n; ++k) {
    int64_t p = b.op(0, "aten::mm", "", {val::ref(m), val::ref(m)}, 1, stream);
    b.deleteRefs(0, {p}, stream);
  }
  b.deleteRefs(0, {m}, stream);
}

// --- ATen, fetch, streams --------------------------------------------------

TEST(CudaExecutor, AtenOpsOnCudaAndFetchOfCudaValues) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  int64_t a = b.op(
      0, "aten::arange", "", {val::i(6)}, 1, 0,
      {{"dtype", val::dtype(plan::FLOAT32)}, {"device", val::device("cuda")}});
  int64_t m = b.op(0, "aten::reshape", "", {val::ref(a), val::ints({2, 3})});
  int64_t t = b.op(0, "aten::t", "", {val::ref(m)});
  int64_t p = b.op(0, "aten::mm", "", {val::ref(m), val::ref(t)});
  // "cuda:0" names this worker's GPU too (one rank per GPU).
  int64_t o = b.op(0, "aten::ones", "", {val::ints({2, 2})}, 1, 0,
                   {{"device", val::device("cuda:0")}});
  int64_t s = b.op(0, "aten::add", "Tensor",
                   {val::ref(p), val::ref(o), val::scalar(2)});
  int64_t i = b.op(0, "aten::argmax", "", {val::ref(s)});
  int64_t g = b.op(0, "aten::gt", "Scalar", {val::ref(a), val::scalar(2)});
  int64_t fs = b.fetch(0, s), fi = b.fetch(0, i), fg = b.fetch(0, g);
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor M = at::arange(6, at::kFloat).reshape({2, 3});
  at::Tensor S = at::mm(M, M.t()) + 2 * at::ones({2, 2});
  EXPECT_TRUE(at::equal(h.value(fs), S));
  EXPECT_EQ(h.value(fi).item<int64_t>(), S.argmax().item<int64_t>());
  EXPECT_TRUE(at::equal(h.value(fg), at::arange(6, at::kFloat).gt(2)));
}

TEST(CudaStreams, EachPlanStreamHasItsOwnCudaStream) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  int64_t side = b.stream("side");
  int64_t s0 = b.ref(), d0 = b.ref(), s1 = b.ref(), d1 = b.ref();
  // Streams take their CUDA streams once a plan names a cuda device.
  b.op(0, "aten::ones", "", {val::ints({1})}, 1, 0, onCuda);
  b.op(0, "aten::ones", "", {val::ints({1})}, 1, side, onCuda);
  callFn(b, 0, "cuda_test.current_stream", {}, {s0, d0});
  callFn(b, side, "cuda_test.current_stream", {}, {s1, d1});
  int64_t f0 = b.fetch(0, s0), fd0 = b.fetch(0, d0);
  int64_t f1 = b.fetch(0, s1, side), fd1 = b.fetch(0, d1, side);
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  int64_t id0 = h.value(f0).item<int64_t>(), id1 = h.value(f1).item<int64_t>();
  EXPECT_NE(id0, id1);
  EXPECT_NE(id0, 0) << "the default plan stream runs on a pool stream";
  EXPECT_NE(id1, 0);
  // Rank 0: cuda:(0 % device count).
  EXPECT_EQ(h.value(fd0).item<int64_t>(), 0);
  EXPECT_EQ(h.value(fd1).item<int64_t>(), 0);
}

TEST(CudaStreams, KernelsOfTwoStreamsOverlap) {
  REQUIRE_GPU();
  {
    std::lock_guard<std::mutex> lock(flagMutex);
    flag = false;
  }
  CudaHarness h;
  {
    // Warm-up: loads every kernel used below (loading a CUDA module while
    // other kernels run can synchronize the device) and fills the caching
    // allocator of both streams.
    PlanBuilder w({{"x", 1}});
    int64_t compute = w.stream("compute");
    busyGpu(w, compute, 1);
    int64_t o = w.op(0, "aten::ones", "", {val::ints({4})}, 1, compute, onCuda);
    w.fetch(0, o, compute);
    int64_t f = w.op(0, "aten::full", "", {val::ints({4}), val::scalar(3)}, 1,
                     0, onCuda);
    w.fetch(0, f);
    h.run(w);
    ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  }
  PlanBuilder b({{"x", 1}});
  int64_t compute = b.stream("compute");
  // "compute" queues ~0.5 s of kernels, then tells the default stream.
  busyGpu(b, compute, 200);
  int64_t one = b.op(0, "aten::ones", "", {val::ints({4})}, 1, compute, onCuda);
  callFn(b, compute, "cuda_test.set_flag");
  int64_t fa = b.fetch(0, one, compute);
  // The default stream starts once those kernels are queued: on a CUDA
  // stream of its own it does not wait for them.
  callFn(b, 0, "cuda_test.wait_flag");
  int64_t x =
      b.op(0, "aten::full", "", {val::ints({4}), val::scalar(3)}, 1, 0, onCuda);
  int64_t fb = b.fetch(0, x);
  auto start = Clock::now();
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  EXPECT_TRUE(at::equal(h.value(fa), at::ones({4})));
  EXPECT_TRUE(at::equal(h.value(fb), at::full({4}, 3.f)));
  auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<milliseconds>(d).count();
  };
  long a = ms(h.arrived[fa] - start), bt = ms(h.arrived[fb] - start);
  EXPECT_GT(a, 100) << "the busy stream's kernels were too short to tell";
  EXPECT_LT(bt + 50, a) << "the default stream's fetch (" << bt
                        << " ms) waited for the other stream's kernels (" << a
                        << " ms)";
}

// --- device-time trace events ------------------------------------------------

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

/// One stream's trace: host-side spans and device-time spans by
/// instruction.
struct StreamTrace {
  std::map<int64_t, plan::TraceEvent> host, device;
  /// Device spans in start order.
  std::vector<plan::TraceEvent> deviceInOrder() const {
    std::vector<plan::TraceEvent> v;
    for (const auto &[id, e] : device)
      v.push_back(e);
    std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) {
      return a.start_ns() < b.start_ns();
    });
    return v;
  }
};

StreamTrace traceOf(Harness &h, int64_t stream) {
  std::lock_guard<std::mutex> lock(h.mutex);
  StreamTrace t;
  for (const auto &e : h.traces) {
    if (e.stream() != stream)
      continue;
    auto &side = e.on_device() ? t.device : t.host;
    EXPECT_TRUE(side.emplace(e.instruction(), e).second)
        << "two " << (e.on_device() ? "device" : "host")
        << " events for instruction " << e.instruction();
  }
  return t;
}

int64_t duration(const plan::TraceEvent &e) {
  return e.end_ns() - e.start_ns();
}

int64_t median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Slack for comparisons between the host clock and device times placed on
/// it (the anchor's error: an event recorded on an idle stream completes
/// within microseconds).
constexpr int64_t kClockSlackNs = 100'000;

TEST(CudaTrace, DeviceSpansShowWhenTheGpuRanEachInstruction) {
  REQUIRE_GPU();
  CudaHarness h({}, /*trace=*/true);
  {
    PlanBuilder w({{"x", 1}});
    busyGpu(w, 0, 1);
    int64_t o = w.op(0, "aten::ones", "", {val::ints({4})}, 1, 0, onCuda);
    w.op(0, "aten::add", "Tensor", {val::ref(o), val::ref(o), val::scalar(1)});
    w.fetch(0, o);
    w.status(0);
    ASSERT_NO_FATAL_FAILURE(h.warmUp(w));
  }
  PlanBuilder b({{"x", 1}});
  int64_t m =
      b.op(0, "aten::randn", "", {val::ints({4096, 4096})}, 1, 0, onCuda);
  int64_t small = b.op(0, "aten::ones", "", {val::ints({4})}, 1, 0, onCuda);
  std::vector<int64_t> mms, adds;
  for (int k = 0; k < 6; ++k) {
    int64_t p = b.op(0, "aten::mm", "", {val::ref(m), val::ref(m)});
    mms.push_back(Harness::last(b));
    b.deleteRefs(0, {p});
    int64_t s = b.op(0, "aten::add", "Tensor",
                     {val::ref(small), val::ref(small), val::scalar(1)});
    adds.push_back(Harness::last(b));
    b.deleteRefs(0, {s});
  }
  b.fetch(0, small);
  int64_t status = b.status(0);
  int64_t before = steadyNs();
  h.run(b);
  int64_t after = steadyNs();
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  ASSERT_FALSE(h.statuses.empty());
  EXPECT_EQ(h.statuses.back(), status);
  EXPECT_FALSE(h.concurrentTraces);

  StreamTrace t = traceOf(h, 0);
  // Every instruction traced on the CUDA stream has its device span, under
  // the same name (the status request only on the host: it synchronizes).
  for (const auto &[id, host] : t.host) {
    if (id == status)
      continue;
    auto it = t.device.find(id);
    ASSERT_NE(it, t.device.end()) << "no device span for " << host.name();
    EXPECT_EQ(it->second.name(), host.name());
  }
  EXPECT_EQ(t.device.size() + 1, t.host.size());

  // On one stream the device spans follow each other without overlapping,
  // in instruction order, inside the host window of the run, and none
  // starts before its instruction was launched.
  auto ordered = t.deviceInOrder();
  for (size_t k = 0; k < ordered.size(); ++k) {
    const auto &e = ordered[k];
    EXPECT_LE(e.start_ns(), e.end_ns());
    EXPECT_GE(e.start_ns(), before - kClockSlackNs) << e.name();
    EXPECT_LE(e.end_ns(), after + kClockSlackNs) << e.name();
    EXPECT_GE(e.start_ns(), t.host[e.instruction()].start_ns() - kClockSlackNs)
        << e.name() << " ran on the GPU before it was launched";
    if (k > 0) {
      EXPECT_LT(ordered[k - 1].instruction(), e.instruction());
      EXPECT_GE(e.start_ns(), ordered[k - 1].end_ns() - 1'000)
          << e.name() << " overlaps " << ordered[k - 1].name();
    }
  }

  // The products take the GPU's time; their launches return at once. The
  // host spans alone would make the adds look as long.
  std::vector<int64_t> mmDevice, mmLaunch, addDevice;
  for (int64_t id : mms) {
    mmDevice.push_back(duration(t.device[id]));
    mmLaunch.push_back(duration(t.host[id]));
  }
  for (int64_t id : adds)
    addDevice.push_back(duration(t.device[id]));
  EXPECT_GT(median(mmDevice), 20 * median(addDevice))
      << "mm " << median(mmDevice) << " ns vs add " << median(addDevice)
      << " ns on the device";
  EXPECT_GT(median(mmDevice), 5 * median(mmLaunch))
      << "mm on the device " << median(mmDevice) << " ns vs its launch "
      << median(mmLaunch) << " ns";
  // The six products fill most of the device window between the first and
  // the last.
  int64_t window =
      t.device[mms.back()].end_ns() - t.device[mms.front()].start_ns();
  int64_t busy = 0;
  for (int64_t d : mmDevice)
    busy += d;
  EXPECT_GT(busy, window / 2);
}

TEST(CudaTrace, DeviceSpansOfTwoStreamsOverlapWhereTheirLaunchesDoNot) {
  REQUIRE_GPU();
  {
    std::lock_guard<std::mutex> lock(flagMutex);
    flag = false;
  }
  CudaHarness h({}, /*trace=*/true);
  {
    PlanBuilder w({{"x", 1}});
    int64_t compute = w.stream("compute");
    busyGpu(w, compute, 1);
    busyGpu(w, 0, 1);
    int64_t o = w.op(0, "aten::ones", "", {val::ints({4})}, 1, compute, onCuda);
    w.fetch(0, o, compute);
    w.status(0);
    ASSERT_NO_FATAL_FAILURE(h.warmUp(w));
  }
  PlanBuilder b({{"x", 1}});
  int64_t compute = b.stream("compute");
  // "compute" launches ~0.25 s of products, then lets the default stream
  // launch its own: on the host the two streams' launches come one after
  // the other, on the GPU their work runs at the same time.
  busyGpu(b, compute, 100);
  int64_t one = b.op(0, "aten::ones", "", {val::ints({4})}, 1, compute, onCuda);
  callFn(b, compute, "cuda_test.set_flag");
  b.fetch(0, one, compute);
  callFn(b, 0, "cuda_test.wait_flag");
  busyGpu(b, 0, 20);
  int64_t x =
      b.op(0, "aten::full", "", {val::ints({4}), val::scalar(3)}, 1, 0, onCuda);
  b.fetch(0, x);
  b.status(0);
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();

  struct Window {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    void add(const plan::TraceEvent &e) {
      lo = std::min(lo, e.start_ns());
      hi = std::max(hi, e.end_ns());
    }
  };
  auto mmWindows = [](const std::map<int64_t, plan::TraceEvent> &events) {
    Window w;
    for (const auto &[id, e] : events)
      if (e.name() == "aten::mm")
        w.add(e);
    return w;
  };
  StreamTrace c = traceOf(h, compute), d = traceOf(h, 0);
  Window cHost = mmWindows(c.host), dHost = mmWindows(d.host);
  Window cDev = mmWindows(c.device), dDev = mmWindows(d.device);
  ASSERT_LT(cDev.lo, cDev.hi);
  ASSERT_LT(dDev.lo, dDev.hi);
  // The flag orders the launches on the host.
  EXPECT_LE(cHost.hi, dHost.lo);
  // On the device, the default stream's products run while the compute
  // stream's are still running: most of the default stream's device window
  // lies inside the compute stream's.
  int64_t overlap = std::min(cDev.hi, dDev.hi) - std::max(cDev.lo, dDev.lo);
  EXPECT_GT(overlap, (dDev.hi - dDev.lo) / 2)
      << "compute on the GPU [" << cDev.lo << ", " << cDev.hi << "], default ["
      << dDev.lo << ", " << dDev.hi << "]";
  EXPECT_GT(cDev.hi - cDev.lo, 10 * (cHost.hi - cHost.lo))
      << "the compute stream's products ran for about as long as their "
         "launches took: the device spans are launch times";
}

// --- borrows with CUDA events ------------------------------------------------

TEST(CudaBorrows, FirstUseWaitsForTheOriginsKernels) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  int64_t comm = b.stream("comm");
  int64_t x = b.op(0, "aten::zeros", "", {val::ints({1024})}, 1, 0, onCuda);
  busyGpu(b, 0, 40); // delays the fill below on the GPU
  b.op(0, "aten::fill_", "Scalar", {val::ref(x), val::scalar(7)}, 0);
  auto br = borrow(b, 1, x, 0, comm, false);
  int64_t s = b.op(0, "aten::sum", "", {val::ref(br.result)}, 1, comm);
  int64_t fs = b.fetch(0, s, comm);
  drop(b, 1, 0);
  int64_t fx = b.fetch(0, x);
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  EXPECT_EQ(h.value(fs).item<float>(), 7.f * 1024);
  EXPECT_TRUE(at::equal(h.value(fx), at::full({1024}, 7.f)));
}

TEST(CudaBorrows, MutableBorrowsInPlaceChangeIsVisibleAfterDrop) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  int64_t comm = b.stream("comm");
  int64_t x = b.op(0, "aten::ones", "", {val::ints({1024})}, 1, 0, onCuda);
  auto br = borrow(b, 7, x, 0, comm, true);
  b.add(0, comm).mutable_borrow_first_use()->set_borrow(7);
  busyGpu(b, comm, 40); // delays the in-place change on the GPU
  b.op(0, "aten::mul_", "Scalar", {val::ref(br.result), val::scalar(4)}, 0,
       comm);
  b.add(0, comm).mutable_borrow_last_use()->set_borrow(7);
  int64_t early = b.op(0, "aten::neg", "", {val::ref(x)}); // BORROWED
  int64_t earlyId = Harness::last(b);
  (void)early;
  drop(b, 7, 0);
  int64_t s = b.op(0, "aten::sum", "", {val::ref(x)});
  int64_t fs = b.fetch(0, s);
  CudaHarness h;
  h.run(b);
  auto f = h.failuresFor(earlyId);
  ASSERT_EQ(f.size(), 1u) << h.allFailures();
  EXPECT_NE(f[0].message().find("BORROWED"), std::string::npos);
  EXPECT_EQ(h.failures.size(), 1u) << h.allFailures();
  // The origin's sum ran on its own CUDA stream, after the drop's event.
  EXPECT_EQ(h.value(fs).item<float>(), 4.f * 1024);
}

// --- collectives through NCCL
// -------------------------------------------------

TEST(CudaCollectives, ReduceStackAndToMeshWithNcclOnOneRank) {
  REQUIRE_GPU();
  TempDir dir("nccl-executor");
  ExecutorOptions o;
  // No Gloo: a CUDA collective that succeeds went through NCCL.
  o.cudaCollectives = makeNcclBackend(std::make_shared<FileStore>(dir.path()),
                                      std::chrono::seconds(30));
  if (!o.cudaCollectives)
    GTEST_SKIP() << "built without NCCL (CUDA toolkit or NCCL not found)";
  PlanBuilder b({{"x", 1}});
  int64_t comm = b.stream("comm");
  plan::TensorMeta m = meta(plan::FLOAT32, {6});
  int64_t x = b.op(
      0, "aten::arange", "", {val::i(6)}, 1, comm,
      {{"dtype", val::dtype(plan::FLOAT32)}, {"device", val::device("cuda")}});
  int64_t sum = b.reduce(0, x, m, {}, plan::SUM, false, comm);
  int64_t avg = b.reduce(0, x, m, {"x"}, plan::AVG, false, comm);
  int64_t mx = b.reduce(0, x, m, {}, plan::MAX, false, comm);
  int64_t st = b.reduce(0, x, m, {"x"}, plan::STACK, false, comm);
  int64_t a2a = b.reduce(0, x, m, {"x"}, plan::STACK, true, comm);
  int64_t x1 =
      b.op(0, "aten::reshape", "", {val::ref(x), val::ints({1, 6})}, 1, comm);
  int64_t rs = b.reduce(0, x1, meta(plan::FLOAT32, {1, 6}), {"x"}, plan::SUM,
                        true, comm);
  // The result is a CUDA tensor: adding it to one works.
  int64_t chk =
      b.op(0, "aten::add", "Tensor", {val::ref(sum), val::ref(x)}, 1, comm);
  // to_mesh within the process: a copy, later in-place changes don't show.
  int64_t copy = b.send(0, 0, x, m, comm);
  b.op(0, "aten::mul_", "Scalar", {val::ref(x), val::scalar(10)}, 0, comm);
  // A CPU tensor has no backend here (no Gloo): it fails cleanly.
  int64_t cpu = b.op(0, "aten::ones", "", {val::ints({2})}, 1, comm);
  int64_t bad =
      b.reduce(0, cpu, meta(plan::FLOAT32, {2}), {}, plan::SUM, false, comm);
  int64_t badId = Harness::last(b);
  std::vector<int64_t> fetches;
  for (int64_t r : {sum, avg, mx, st, a2a, rs, chk, copy, x, bad})
    fetches.push_back(b.fetch(0, r, comm));
  CudaHarness h(o);
  h.run(b);
  at::Tensor X = at::arange(6, at::kFloat);
  EXPECT_TRUE(at::equal(h.value(fetches[0]), X));
  EXPECT_TRUE(at::equal(h.value(fetches[1]), X));
  EXPECT_TRUE(at::equal(h.value(fetches[2]), X));
  EXPECT_TRUE(at::equal(h.value(fetches[3]), X.reshape({1, 6})));
  EXPECT_TRUE(at::equal(h.value(fetches[4]), X));
  EXPECT_TRUE(at::equal(h.value(fetches[5]), X));
  EXPECT_TRUE(at::equal(h.value(fetches[6]), 2 * X));
  EXPECT_TRUE(at::equal(h.value(fetches[7]), X));
  EXPECT_TRUE(at::equal(h.value(fetches[8]), 10 * X));
  auto f = h.failuresFor(badId);
  ASSERT_EQ(f.size(), 1u) << h.allFailures();
  EXPECT_NE(f[0].message().find("no collective backend"), std::string::npos)
      << f[0].message();
  EXPECT_EQ(h.error(fetches[9]).instruction(), badId);
  EXPECT_EQ(h.failures.size(), 1u) << h.allFailures();
}

TEST(CudaCollectives, WithoutNcclACudaReduceFailsCleanly) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  int64_t x = b.op(0, "aten::ones", "", {val::ints({3})}, 1, 0, onCuda);
  int64_t r = b.reduce(0, x, meta(plan::FLOAT32, {3}), {}, plan::SUM);
  int64_t id = Harness::last(b);
  int64_t y = b.op(0, "aten::neg", "", {val::ref(x)});
  int64_t fr = b.fetch(0, r), fy = b.fetch(0, y);
  CudaHarness h; // no backends at all
  h.run(b);
  auto f = h.failuresFor(id);
  ASSERT_EQ(f.size(), 1u) << h.allFailures();
  EXPECT_NE(f[0].message().find("no NCCL backend"), std::string::npos)
      << f[0].message();
  EXPECT_EQ(h.error(fr).instruction(), id);
  EXPECT_TRUE(at::equal(h.value(fy), -at::ones({3})));
}

// --- recordings, errors, memory cap
// -------------------------------------------

TEST(CudaRecordings, DefinedOnceCalledWithDifferentCudaActuals) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  {
    auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
    rec->set_id(1);
    rec->add_formals(1000);
    rec->add_formals(1001);
    rec->add_results(1003);
    auto body = [&](int64_t id, const char *name, int64_t a, int64_t c,
                    int64_t r) {
      auto *inst = rec->add_body();
      inst->set_id(id);
      auto *op = inst->mutable_call_op();
      op->set_name(name);
      op->set_overload("Tensor");
      *op->add_args() = val::ref(a);
      *op->add_args() = val::ref(c);
      op->add_results(r);
    };
    body(500, "aten::mul", 1000, 1001, 1002);
    body(501, "aten::add", 1002, 1000, 1003);
  }
  int64_t x = b.op(
      0, "aten::arange", "", {val::i(4)}, 1, 0,
      {{"dtype", val::dtype(plan::FLOAT32)}, {"device", val::device("cuda")}});
  int64_t y =
      b.op(0, "aten::full", "", {val::ints({4}), val::scalar(3)}, 1, 0, onCuda);
  auto call = [&](int64_t a, int64_t c) {
    auto *cr = b.add(0).mutable_call_recording();
    cr->set_recording(1);
    cr->add_actuals(a);
    cr->add_actuals(c);
    int64_t r = b.ref();
    cr->add_results(r);
    return r;
  };
  int64_t r1 = call(x, y), r2 = call(y, x);
  int64_t f1 = b.fetch(0, r1), f2 = b.fetch(0, r2);
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor X = at::arange(4, at::kFloat), Y = at::full({4}, 3.f);
  EXPECT_TRUE(at::equal(h.value(f1), X * Y + X));
  EXPECT_TRUE(at::equal(h.value(f2), Y * X + Y));
}

// --- CUDA graphs (docs/plan.md, "CUDA graphs")
// -----------------------------------------------------------------------

/// A recording built step by step, marked a CUDA-graph candidate unless
/// told otherwise.
struct GraphBody {
  plan::Recording *rec;
  int64_t nextId;

  int64_t op(const std::string &name, const std::string &overload,
             const std::vector<plan::Value> &args,
             const std::vector<int64_t> &results) {
    plan::Instruction *inst = rec->add_body();
    inst->set_id(nextId++);
    auto *call = inst->mutable_call_op();
    call->set_name(name);
    call->set_overload(overload);
    for (const plan::Value &a : args)
      *call->add_args() = a;
    for (int64_t r : results)
      call->add_results(r);
    return inst->id();
  }
  void del(const std::vector<int64_t> &refs) {
    plan::Instruction *inst = rec->add_body();
    inst->set_id(nextId++);
    for (int64_t r : refs)
      inst->mutable_delete_refs()->add_refs(r);
  }
};

GraphBody defineRecording(PlanBuilder &b, int64_t id,
                          const std::vector<int64_t> &formals,
                          const std::vector<int64_t> &results,
                          bool candidate = true) {
  auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
  rec->set_id(id);
  rec->set_cuda_graph(candidate);
  for (int64_t f : formals)
    rec->add_formals(f);
  for (int64_t r : results)
    rec->add_results(r);
  return GraphBody{rec, id * 1000};
}

int64_t callRecording(PlanBuilder &b, int64_t id,
                      const std::vector<int64_t> &actuals) {
  auto *cr = b.add(0).mutable_call_recording();
  cr->set_recording(id);
  for (int64_t a : actuals)
    cr->add_actuals(a);
  int64_t r = b.ref();
  cr->add_results(r);
  return r;
}

/// Recording 1(x, y) -> r: r = -(x * y + x), its locals deleted inside.
void defineChain(PlanBuilder &b, bool candidate = true) {
  GraphBody g = defineRecording(b, 1, {1000, 1001}, {1004}, candidate);
  g.op("aten::mul", "Tensor", {val::ref(1000), val::ref(1001)}, {1002});
  g.op("aten::add", "Tensor", {val::ref(1002), val::ref(1000)}, {1003});
  g.del({1002});
  g.op("aten::neg", "", {val::ref(1003)}, {1004});
  g.del({1003});
}

at::Tensor chain(const at::Tensor &x, const at::Tensor &y) {
  return -(x * y + x);
}

int64_t cudaFull(PlanBuilder &b, int64_t n, double v) {
  return b.op(0, "aten::full", "", {val::ints({n}), val::scalar(v)}, 1, 0,
              onCuda);
}

int64_t cudaArange(PlanBuilder &b, int64_t n) {
  return b.op(0, "aten::arange", "", {val::i(n)}, 1, 0,
              {{"dtype", val::dtype(plan::FLOAT32)},
               {"device", val::device("cuda")}});
}

TEST(CudaGraphs, ReplaysGiveEachCallItsOwnValues) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  defineChain(b);
  int64_t y = cudaArange(b, 64);
  std::vector<int64_t> fetches;
  for (int k = 0; k < 5; ++k) { // each result fetched, then deleted
    int64_t r = callRecording(b, 1, {cudaFull(b, 64, k + 1), y});
    fetches.push_back(b.fetch(0, r));
    b.deleteRefs(0, {r});
  }
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor Y = at::arange(64, at::kFloat);
  for (int k = 0; k < 5; ++k)
    EXPECT_TRUE(at::equal(h.value(fetches[k]),
                          chain(at::full({64}, float(k + 1)), Y)))
        << "call " << k;
  CudaGraphStats s = h.executor->cudaGraphStats();
  EXPECT_EQ(s.captures, 1); // at the second call, after one warm-up call
  EXPECT_EQ(s.replays, 4);
  EXPECT_EQ(s.graphs, 1);
  EXPECT_EQ(s.refused, 0);
}

TEST(CudaGraphs, ResultsAreLentUntilOneIsStillHeldThenCopiedOut) {
  REQUIRE_GPU();
  // A replay binds its results to the graph's own buffers. Calls 1-4 delete
  // their result before the next call: one capture, three replays, nothing
  // copied. Call 5's result is kept to the end, as is a view of call 2's
  // result of recording 2: the next call of each finds its buffer held, so
  // it runs op by op and the graph is captured again, copying that result
  // out from then on. Every kept value is its own call's.
  PlanBuilder b({{"x", 1}});
  defineChain(b);
  int64_t y = cudaArange(b, 64);
  std::vector<int64_t> fetches;
  int64_t kept = -1;
  for (int k = 0; k < 8; ++k) {
    int64_t r = callRecording(b, 1, {cudaFull(b, 64, k + 1), y});
    fetches.push_back(b.fetch(0, r));
    if (k == 4)
      kept = r;
    else
      b.deleteRefs(0, {r});
  }
  {
    GraphBody g = defineRecording(b, 2, {1000, 1001}, {1004});
    g.op("aten::mul", "Tensor", {val::ref(1000), val::ref(1001)}, {1002});
    g.op("aten::add", "Tensor", {val::ref(1002), val::ref(1000)}, {1003});
    g.del({1002});
    g.op("aten::neg", "", {val::ref(1003)}, {1004});
    g.del({1003});
  }
  int64_t view = -1;
  for (int k = 0; k < 3; ++k) {
    int64_t r = callRecording(b, 2, {cudaFull(b, 64, 10 + k), y});
    if (k == 1)
      view = b.op(0, "aten::view", "", {val::ref(r), val::ints({8, 8})});
    b.deleteRefs(0, {r});
  }
  int64_t fkept = b.fetch(0, kept), fview = b.fetch(0, view);
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor Y = at::arange(64, at::kFloat);
  for (int k = 0; k < 8; ++k)
    EXPECT_TRUE(at::equal(h.value(fetches[k]),
                          chain(at::full({64}, float(k + 1)), Y)))
        << "call " << k;
  EXPECT_TRUE(at::equal(h.value(fkept), chain(at::full({64}, 5.f), Y)));
  EXPECT_TRUE(
      at::equal(h.value(fview), chain(at::full({64}, 11.f), Y).view({8, 8})));
  CudaGraphStats s = h.executor->cudaGraphStats();
  EXPECT_EQ(s.refused, 0);
  // Recording 1: captured at calls 2 and 7, replayed at 2-5 and 7-8 (call
  // 6 found call 5's result held). Recording 2: captured at call 2,
  // replayed there; call 3 found the view holding call 2's result.
  EXPECT_EQ(s.captures, 3);
  EXPECT_EQ(s.replays, 7);
  int held = 0;
  for (const std::string &line : h.debugLines)
    held += line.find("is still held at the next call") != std::string::npos;
  EXPECT_EQ(held, 2);
}

TEST(CudaGraphs, OffOrUnmarkedRecordingsRunOpByOp) {
  REQUIRE_GPU();
  for (bool off : {true, false}) {
    PlanBuilder b({{"x", 1}});
    defineChain(b, /*candidate=*/off);
    int64_t y = cudaArange(b, 16);
    int64_t last = -1;
    for (int k = 0; k < 4; ++k)
      last = callRecording(b, 1, {cudaFull(b, 16, k), y});
    int64_t f = b.fetch(0, last);
    ExecutorOptions options;
    options.cudaGraphs = !off;
    CudaHarness h(options);
    h.run(b);
    ASSERT_TRUE(h.failures.empty()) << h.allFailures();
    EXPECT_TRUE(
        at::equal(h.value(f), chain(at::full({16}, 3.f), at::arange(16.f))));
    CudaGraphStats s = h.executor->cudaGraphStats();
    EXPECT_EQ(s.captures, 0) << (off ? "graphs off" : "not a candidate");
    EXPECT_EQ(s.replays, 0);
  }
}

TEST(CudaGraphs, NewInputShapesWarmUpAndCaptureAgain) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  defineChain(b);
  std::vector<std::pair<int64_t, int64_t>> fetches; // (size, fetch)
  for (int64_t n : {4, 4, 4, 8, 8, 8, 4}) {
    int64_t r = callRecording(b, 1, {cudaFull(b, n, 2), cudaArange(b, n)});
    fetches.emplace_back(n, b.fetch(0, r));
    b.deleteRefs(0, {r}); // released before the next call
  }
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  for (auto [n, f] : fetches)
    EXPECT_TRUE(
        at::equal(h.value(f), chain(at::full({n}, 2.f), at::arange(n, at::kFloat))));
  CudaGraphStats s = h.executor->cudaGraphStats();
  // [4]: warm, capture; [8]: warm, capture; [4] again: warm (one graph a
  // segment: the [8] graph was dropped, and none is held at the end).
  EXPECT_EQ(s.captures, 2);
  EXPECT_EQ(s.replays, 4);
  EXPECT_EQ(s.graphs, 0);
}

TEST(CudaGraphs, AnErroredActualGivesDependentErrorsAndReplaysResume) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  defineChain(b);
  int64_t y = cudaArange(b, 8);
  int64_t r1 = callRecording(b, 1, {cudaFull(b, 8, 1), y});
  int64_t r2 = callRecording(b, 1, {cudaFull(b, 8, 2), y}); // captured
  int64_t f2 = b.fetch(0, r2);
  b.deleteRefs(0, {r2}); // released: call 4 may replay over its buffer
  int64_t m = b.op(0, "aten::ones", "", {val::ints({2, 3})}, 1, 0, onCuda);
  int64_t bad = b.op(0, "aten::mm", "", {val::ref(m), val::ref(m)});
  int64_t badId = Harness::last(b);
  int64_t r3 = callRecording(b, 1, {bad, y});
  int64_t r4 = callRecording(b, 1, {cudaFull(b, 8, 4), y});
  int64_t f1 = b.fetch(0, r1), f3 = b.fetch(0, r3), f4 = b.fetch(0, r4);
  CudaHarness h;
  h.run(b);
  ASSERT_EQ(h.failures.size(), 1u) << h.allFailures(); // the mm, once
  EXPECT_EQ(h.error(f3).instruction(), badId);
  at::Tensor Y = at::arange(8, at::kFloat);
  EXPECT_TRUE(at::equal(h.value(f1), chain(at::full({8}, 1.f), Y)));
  EXPECT_TRUE(at::equal(h.value(f2), chain(at::full({8}, 2.f), Y)));
  EXPECT_TRUE(at::equal(h.value(f4), chain(at::full({8}, 4.f), Y)));
  CudaGraphStats s = h.executor->cudaGraphStats();
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.replays, 2); // calls 2 and 4; call 3 ran op by op
}

/// Calls recording 1 on (w, grad) four times -- warm-up, capture, two
/// replays; each result but the last deleted before the next call -- and
/// fetches w and the last call's result.
std::pair<int64_t, int64_t> callFourTimesAndFetch(PlanBuilder &b, int64_t w,
                                                  int64_t grad) {
  int64_t last = -1;
  for (int k = 0; k < 4; ++k) {
    if (last >= 0)
      b.deleteRefs(0, {last});
    last = callRecording(b, 1, {w, grad});
  }
  return {b.fetch(0, w), b.fetch(0, last)};
}

TEST(CudaGraphs, InPlaceWritesReachTheCallersTensor) {
  REQUIRE_GPU();
  // Recording 1(w, g) -> r: w -= g (in place, returning w), r = w * 2. The
  // returned self is the caller's w, not the graph's buffer.
  PlanBuilder b({{"x", 1}});
  GraphBody g = defineRecording(b, 1, {1000, 1001}, {1003});
  g.op("aten::sub_", "Tensor", {val::ref(1000), val::ref(1001)}, {1002});
  g.op("aten::mul", "Scalar", {val::ref(1002), val::scalar(2)}, {1003});
  int64_t w = cudaFull(b, 32, 100);
  int64_t grad = cudaArange(b, 32);
  auto [fw, fr] = callFourTimesAndFetch(b, w, grad);
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor W = at::full({32}, 100.f) - 4 * at::arange(32, at::kFloat);
  EXPECT_TRUE(at::equal(h.value(fw), W));
  EXPECT_TRUE(at::equal(h.value(fr), W * 2));
  EXPECT_EQ(h.executor->cudaGraphStats().replays, 3);
}

TEST(CudaGraphs, WritesThroughAViewOfAnInputReachTheCallersTensor) {
  REQUIRE_GPU();
  // Recording 1(w, g) -> r: w.view(4, 8) *= 2 (the plan says the view is
  // written, not w), r = that view + g.
  PlanBuilder b({{"x", 1}});
  GraphBody g = defineRecording(b, 1, {1000, 1001}, {1004});
  g.op("aten::view", "", {val::ref(1000), val::ints({4, 8})}, {1002});
  g.op("aten::mul_", "Scalar", {val::ref(1002), val::scalar(2)}, {1003});
  g.op("aten::add", "Tensor", {val::ref(1003), val::ref(1001)}, {1004});
  g.del({1002, 1003});
  int64_t w = cudaArange(b, 32);
  int64_t grad = b.op(0, "aten::ones", "", {val::ints({4, 8})}, 1, 0, onCuda);
  auto [fw, fr] = callFourTimesAndFetch(b, w, grad);
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor W = at::arange(32, at::kFloat) * 16;
  EXPECT_TRUE(at::equal(h.value(fw), W));
  EXPECT_TRUE(at::equal(h.value(fr), W.view({4, 8}) + 1));
  EXPECT_EQ(h.executor->cudaGraphStats().replays, 3);
}

TEST(CudaGraphs, ResultsThatViewInputsOrEachOtherKeepTheirAliasing) {
  REQUIRE_GPU();
  // Recording 1(w, x) -> (wt, h, hd, y): wt = w.t() (a view of an input,
  // as a forward saves for its backward); h = x @ wt; hd = h.detach() (two
  // results in one storage); y = relu(h). After each replay wt views the
  // caller's w and hd shares h's storage, as in the expansion: writes
  // through them show.
  PlanBuilder b({{"x", 1}});
  GraphBody g = defineRecording(b, 1, {1000, 1001}, {1002, 1003, 1004, 1005});
  g.op("aten::t", "", {val::ref(1000)}, {1002});
  g.op("aten::mm", "", {val::ref(1001), val::ref(1002)}, {1003});
  g.op("aten::detach", "", {val::ref(1003)}, {1004});
  g.op("aten::relu", "", {val::ref(1003)}, {1005});
  int64_t w = b.op(0, "aten::ones", "", {val::ints({8, 16})}, 1, 0, onCuda);
  std::vector<std::array<int64_t, 4>> results;
  std::vector<int64_t> fy;
  for (int k = 0; k < 4; ++k) {
    int64_t x = b.op(0, "aten::full", "",
                     {val::ints({4, 16}), val::scalar(k - 1.5)}, 1, 0, onCuda);
    auto *cr = b.add(0).mutable_call_recording();
    cr->set_recording(1);
    cr->add_actuals(w);
    cr->add_actuals(x);
    std::array<int64_t, 4> r{};
    for (int64_t &ref : r)
      cr->add_results(ref = b.ref());
    results.push_back(r);
    // y, bound to the graph's buffer (lent), is released before the next
    // call but the last; the others are views of w or of a copy.
    fy.push_back(b.fetch(0, r[3]));
    if (k < 3)
      b.deleteRefs(0, {r[3]});
  }
  // Through the last (replayed) call's views: w += 1, h *= 0.
  auto [wt, hLast, hd, y] = results.back();
  b.op(0, "aten::add_", "Scalar", {val::ref(wt), val::scalar(1)});
  b.op(0, "aten::mul_", "Scalar", {val::ref(hd), val::scalar(0)});
  int64_t fw = b.fetch(0, w), fh = b.fetch(0, hLast);
  int64_t fh0 = b.fetch(0, results[0][1]);
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  for (int k = 0; k < 4; ++k)
    EXPECT_TRUE(at::equal(h.value(fy[k]),
                          at::full({4, 8}, std::max(0.0, 16 * (k - 1.5)))))
        << "call " << k;
  EXPECT_TRUE(at::equal(h.value(fw), at::full({8, 16}, 2.f)));
  EXPECT_TRUE(at::equal(h.value(fh), at::zeros({4, 8})));
  EXPECT_TRUE(at::equal(h.value(fh0), at::full({4, 8}, -24.f)));
  CudaGraphStats s = h.executor->cudaGraphStats();
  EXPECT_EQ(s.refused, 0);
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.replays, 3);
}

TEST(CudaGraphs, InputsThatStayAreReadInPlaceAndThoseThatMoveAreCopied) {
  REQUIRE_GPU();
  // Recording 1(w, x) -> r = w * x + w: w is the same tensor at every call
  // (a parameter). x is one tensor at the warm-up call and the capture, so
  // both inputs are read in place; from the third call on x is a new tensor
  // each call, all kept (none can sit where the first one, kept too, is):
  // the replay finds x moved, and the graph is captured again with x copied
  // into its buffer. Each call its own values.
  PlanBuilder b({{"x", 1}});
  GraphBody g = defineRecording(b, 1, {1000, 1001}, {1003});
  g.op("aten::mul", "Tensor", {val::ref(1000), val::ref(1001)}, {1002});
  g.op("aten::add", "Tensor", {val::ref(1002), val::ref(1000)}, {1003});
  g.del({1002});
  int64_t w = cudaArange(b, 64);
  int64_t first = cudaFull(b, 64, 1);
  std::vector<int64_t> fetches;
  for (int k = 0; k < 6; ++k) {
    int64_t x = k < 2 ? first : cudaFull(b, 64, k + 1);
    int64_t r = callRecording(b, 1, {w, x});
    fetches.push_back(b.fetch(0, r));
    b.deleteRefs(0, {r});
  }
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor W = at::arange(64, at::kFloat);
  for (int k = 0; k < 6; ++k)
    EXPECT_TRUE(at::equal(h.value(fetches[k]),
                          W * float(k < 2 ? 1 : k + 1) + W))
        << "call " << k;
  CudaGraphStats s = h.executor->cudaGraphStats();
  EXPECT_EQ(s.refused, 0);
  EXPECT_EQ(s.captures, 2); // at call 2, and at call 4 after x moved
  EXPECT_EQ(s.replays, 4);  // calls 2, 4, 5, 6; call 3 ran op by op
  std::vector<std::string> captured;
  for (const std::string &line : h.debugLines)
    if (line.find("steps captured") != std::string::npos)
      captured.push_back(line);
  ASSERT_EQ(captured.size(), 2u);
  EXPECT_NE(captured[0].find("2 of 2 inputs in place"), std::string::npos)
      << captured[0];
  EXPECT_NE(captured[1].find("1 of 2 inputs in place"), std::string::npos)
      << captured[1];
}

TEST(CudaGraphs, AHostSyncSplitsTheBodyIntoTwoGraphs) {
  REQUIRE_GPU();
  // Recording 1(x) -> r: a = x * x; b = a - 4; n = nonzero(b) (sized by
  // the data: op by op); r = n * n + n.
  PlanBuilder b({{"x", 1}});
  GraphBody g = defineRecording(b, 1, {1000}, {1005});
  g.op("aten::mul", "Tensor", {val::ref(1000), val::ref(1000)}, {1001});
  g.op("aten::sub", "Scalar", {val::ref(1001), val::scalar(4)}, {1002});
  g.op("aten::nonzero", "", {val::ref(1002)}, {1003});
  g.op("aten::mul", "Tensor", {val::ref(1003), val::ref(1003)}, {1004});
  g.op("aten::add", "Tensor", {val::ref(1004), val::ref(1003)}, {1005});
  std::vector<int64_t> fetches;
  for (int k = 0; k < 4; ++k) { // each result released before the next call
    int64_t r = callRecording(b, 1, {cudaArange(b, 6)});
    fetches.push_back(b.fetch(0, r));
    b.deleteRefs(0, {r});
  }
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor X = at::arange(6, at::kFloat);
  at::Tensor n = at::nonzero(X * X - 4);
  for (int64_t f : fetches)
    EXPECT_TRUE(at::equal(h.value(f), n * n + n));
  CudaGraphStats s = h.executor->cudaGraphStats();
  EXPECT_EQ(s.captures, 2); // before and after the nonzero
  EXPECT_EQ(s.graphs, 2);
  EXPECT_EQ(s.replays, 6); // calls 2-4, two graphs each
}

TEST(CudaGraphs, StretchesAroundWhatABodyCannotCompileAreEachAGraph) {
  REQUIRE_GPU();
  // Recording 1(x) -> r: a = x * x; c = a + x; (a rank tensor: not a
  // compiled body's); d = -c; r = d * 2 (OutlineStretches.h). Each run of
  // ATen calls is outlined and replayed as its own graph.
  PlanBuilder b({{"x", 1}});
  GraphBody g = defineRecording(b, 1, {1000}, {1005});
  g.op("aten::mul", "Tensor", {val::ref(1000), val::ref(1000)}, {1001});
  g.op("aten::add", "Tensor", {val::ref(1001), val::ref(1000)}, {1002});
  g.del({1001});
  plan::Instruction *rank = g.rec->add_body();
  rank->set_id(g.nextId++);
  rank->mutable_rank_tensor()->set_result(1003);
  g.op("aten::neg", "", {val::ref(1002)}, {1004});
  g.op("aten::mul", "Scalar", {val::ref(1004), val::scalar(2)}, {1005});
  std::vector<int64_t> fetches;
  for (int k = 0; k < 5; ++k) { // each result released before the next call
    int64_t r = callRecording(b, 1, {cudaFull(b, 32, k + 0.5)});
    fetches.push_back(b.fetch(0, r));
    b.deleteRefs(0, {r});
  }
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  for (int k = 0; k < 5; ++k) {
    at::Tensor X = at::full({32}, float(k + 0.5));
    EXPECT_TRUE(at::equal(h.value(fetches[k]), -(X * X + X) * 2))
        << "call " << k;
  }
  EXPECT_EQ(h.debugCount("a graph candidate"), 2u);
  CudaGraphStats s = h.executor->cudaGraphStats();
  EXPECT_EQ(s.refused, 0);
  EXPECT_EQ(s.graphs, 2);
  EXPECT_EQ(s.captures, 2); // one per stretch, at the second call
  EXPECT_EQ(s.replays, 8);  // calls 2-5, two graphs each
}

/// An induction tensor of a loop: lower + k * step on trip k.
struct Induction {
  int64_t lower, step;
};

/// `trips` trips of recording 1 carrying `carried` (then `captured`, then
/// the induction tensor if any, as its formals); the fetch of its result.
int64_t fetchLoop(PlanBuilder &b, int64_t trips, int64_t carried,
                  const std::vector<int64_t> &captured,
                  std::optional<Induction> induction = std::nullopt) {
  auto *l = b.add(0).mutable_loop();
  l->set_recording(1);
  l->set_trips(trips);
  l->add_carried(carried);
  for (int64_t c : captured)
    l->add_captured(c);
  if (induction) {
    l->set_lower(induction->lower);
    l->set_step(induction->step);
    auto *ind = l->add_induction();
    ind->set_mesh(0);
    ind->set_stream(0);
  }
  int64_t r = b.ref();
  l->add_results(r);
  return b.fetch(0, r);
}

TEST(CudaGraphs, ALoopReplaysItsBodyOnEveryTrip) {
  REQUIRE_GPU();
  // 50 trips of c = c * 0.5 + x (x captured).
  PlanBuilder b({{"x", 1}});
  GraphBody g = defineRecording(b, 1, {1000, 1001}, {1003});
  g.op("aten::mul", "Scalar", {val::ref(1000), val::scalar(0.5)}, {1002});
  g.op("aten::add", "Tensor", {val::ref(1002), val::ref(1001)}, {1003});
  int64_t c = cudaFull(b, 16, 1000);
  int64_t x = cudaArange(b, 16);
  int64_t f = fetchLoop(b, 50, c, {x});
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor C = at::full({16}, 1000.f), X = at::arange(16, at::kFloat);
  for (int k = 0; k < 50; ++k)
    C = C * 0.5 + X;
  EXPECT_TRUE(at::equal(h.value(f), C));
  CudaGraphStats s = h.executor->cudaGraphStats();
  // Trip 3 finds trip 2's lent result held (it is trip 3's carried c): op
  // by op, then captured again at trip 4 with the result copied out.
  EXPECT_EQ(s.captures, 2);
  EXPECT_EQ(s.replays, 48);
}

TEST(CudaGraphs, ALoopReadingItsInductionTensorReplaysItsBody) {
  REQUIRE_GPU();
  // 40 trips of c = (c + i) * 0.5 + i, i = 3 + 2k the induction tensor (a
  // CPU int64 scalar, read from a GPU buffer each replay fills).
  PlanBuilder b({{"x", 1}});
  GraphBody g = defineRecording(b, 1, {1000, 1001}, {1004});
  g.op("aten::add", "Tensor", {val::ref(1000), val::ref(1001)}, {1002});
  g.op("aten::mul", "Scalar", {val::ref(1002), val::scalar(0.5)}, {1003});
  g.op("aten::add", "Tensor", {val::ref(1003), val::ref(1001)}, {1004});
  g.del({1002, 1003});
  int64_t c = cudaFull(b, 16, 1000);
  int64_t f = fetchLoop(b, 40, c, {}, Induction{3, 2});
  CudaHarness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor C = at::full({16}, 1000.f);
  for (int64_t k = 0; k < 40; ++k) {
    at::Tensor i = at::scalar_tensor(3 + 2 * k, at::kLong);
    C = (C + i) * 0.5 + i;
  }
  EXPECT_TRUE(at::equal(h.value(f), C));
  CudaGraphStats s = h.executor->cudaGraphStats();
  EXPECT_EQ(s.refused, 0);
  EXPECT_EQ(s.captures, 2); // as above: trip 3 finds its c held
  EXPECT_EQ(s.replays, 38);
}

TEST(CudaGraphs, TheTraceShowsOneSlicePerReplay) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  defineChain(b);
  int64_t y = cudaArange(b, 8);
  int64_t last = -1;
  for (int k = 0; k < 4; ++k) {
    if (last >= 0)
      b.deleteRefs(0, {last}); // released: the next call replays over it
    last = callRecording(b, 1, {cudaFull(b, 8, k), y});
  }
  b.fetch(0, last);
  CudaHarness h({}, /*trace=*/true);
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  int replays[2] = {0, 0}, steps[2] = {0, 0}; // host, device spans
  for (const plan::TraceEvent &e : h.traces) {
    if (e.name().rfind("cuda_graph ", 0) == 0) {
      EXPECT_EQ(e.name(), "cuda_graph 1000..1004");
      EXPECT_EQ(e.recording(), 1);
      ++replays[e.on_device()];
    } else if (e.recording() == 1) {
      ++steps[e.on_device()];
    }
  }
  // Calls 2-4 are one slice each; the warm-up call shows its 5 steps.
  EXPECT_EQ(replays[0], 3);
  EXPECT_EQ(replays[1], 3);
  EXPECT_EQ(steps[0], 5);
}

TEST(CudaExecutor, ErrorsOnCudaAreReportedOnceAndPropagate) {
  REQUIRE_GPU();
  PlanBuilder b({{"x", 1}});
  int64_t a = b.op(0, "aten::ones", "", {val::ints({2, 3})}, 1, 0, onCuda);
  int64_t bad = b.op(0, "aten::mm", "", {val::ref(a), val::ref(a)});
  int64_t badId = Harness::last(b);
  int64_t dep = b.op(0, "aten::neg", "", {val::ref(bad)});
  int64_t cpu = b.op(0, "aten::ones", "", {val::ints({2, 3})});
  b.op(0, "aten::add", "Tensor", {val::ref(a), val::ref(cpu)});
  int64_t mixId = Harness::last(b);
  int64_t ok = b.op(0, "aten::mul", "Scalar", {val::ref(a), val::scalar(5)});
  int64_t fdep = b.fetch(0, dep), fok = b.fetch(0, ok);
  CudaHarness h;
  h.run(b);
  auto f = h.failuresFor(badId);
  ASSERT_EQ(f.size(), 1u) << h.allFailures();
  EXPECT_EQ(h.error(fdep).instruction(), badId);
  auto m = h.failuresFor(mixId);
  ASSERT_EQ(m.size(), 1u) << h.allFailures();
  EXPECT_NE(m[0].message().find("device"), std::string::npos) << m[0].message();
  EXPECT_TRUE(at::equal(h.value(fok), at::full({2, 3}, 5.f)));
  EXPECT_EQ(h.failures.size(), 2u) << h.allFailures();
}

TEST(CudaExecutor, MemoryCapCountsCpuMemoryOnly) {
  REQUIRE_GPU();
  // The cap wraps c10's CPU allocator; GPU memory is the caching
  // allocator's (documented in docs/plan.md).
  ExecutorOptions o;
  o.memoryCapBytes = 1 << 20;
  PlanBuilder b({{"x", 1}});
  int64_t g =
      b.op(0, "aten::zeros", "", {val::ints({int64_t(4) << 20})}, 1, 0, onCuda);
  int64_t c = b.op(0, "aten::zeros", "", {val::ints({int64_t(4) << 20})});
  int64_t cId = Harness::last(b);
  int64_t fg = b.op(0, "aten::sum", "", {val::ref(g)});
  int64_t ffg = b.fetch(0, fg), fc = b.fetch(0, c);
  CudaHarness h(o);
  h.run(b);
  EXPECT_EQ(h.value(ffg).item<float>(), 0.f);
  auto f = h.failuresFor(cId);
  ASSERT_EQ(f.size(), 1u) << h.allFailures();
  EXPECT_NE(f[0].message().find("memory cap exceeded"), std::string::npos);
  EXPECT_EQ(h.error(fc).instruction(), cId);
}

} // namespace
