//===- MultiGpuTest.cpp - CUDA collectives across GPUs, one rank each -----===//
//
// Issue "multi-GPU run": a gpu=N mesh of tensor workers, one per GPU, with
// CUDA tensors: every reduce row through NCCL, to_mesh between GPUs with its
// copy semantics, and a reduce on a comm stream under a mutable borrow.
// Values are checked against the same computation in local (CPU) libtorch.
// Skips unless this machine has at least two GPUs (nvidia-smi -L); the
// shared-GPU test (two workers on one device) needs one.
//
//===----------------------------------------------------------------------===//

#include "WorkerTestSupport.h"

#include <cstdio>
#include <cstdlib>
#include <optional>

using namespace monarch::tensor;
using namespace monarch::tensor::testing;

namespace {

int gpuCount() {
  std::FILE *pipe = ::popen("nvidia-smi -L 2>/dev/null", "r");
  if (!pipe)
    return 0;
  int n = 0;
  char line[512];
  while (std::fgets(line, sizeof(line), pipe))
    n += std::strncmp(line, "GPU ", 4) == 0;
  ::pclose(pipe);
  return n;
}

#define REQUIRE_GPUS(n)                                                        \
  do {                                                                         \
    if (gpuCount() < (n))                                                      \
      GTEST_SKIP() << "needs " << (n) << " GPUs (nvidia-smi -L lists "         \
                   << gpuCount() << ")";                                       \
  } while (0)

/// makeX(r) moved to this rank's GPU.
int64_t makeCudaX(PlanBuilder &b, int64_t mesh = 0, int64_t stream = 0) {
  int64_t x = makeX(b, mesh);
  return b.op(mesh, "aten::to", "device",
              {val::ref(x), val::device("cuda"), val::dtype(plan::FLOAT32)}, 1,
              stream);
}

TEST(MultiGpu, EveryReduceRowWithNccl) {
  REQUIRE_GPUS(2);
  PlanBuilder b({{"gpu", 2}});
  auto m = meta(plan::FLOAT32, {2, 3});
  int64_t x = makeCudaX(b);
  std::map<std::string, int64_t> f;
  f["sum"] = b.fetch(0, b.reduce(0, x, m, {"gpu"}, plan::SUM));
  f["avg"] = b.fetch(0, b.reduce(0, x, m, {"gpu"}, plan::AVG));
  f["min"] = b.fetch(0, b.reduce(0, x, m, {}, plan::MIN));
  f["max"] = b.fetch(0, b.reduce(0, x, m, {}, plan::MAX));
  f["prod"] = b.fetch(0, b.reduce(0, x, m, {}, plan::PRODUCT));
  f["sum_scatter"] = b.fetch(0, b.reduce(0, x, m, {"gpu"}, plan::SUM, true));
  f["stack"] = b.fetch(0, b.reduce(0, x, m, {"gpu"}, plan::STACK));
  f["stack_scatter"] =
      b.fetch(0, b.reduce(0, x, m, {"gpu"}, plan::STACK, true));
  int64_t x2 = b.op(0, "aten::clone", "", {val::ref(x)});
  b.reduce(0, x2, m, {"gpu"}, plan::SUM);
  b.program()
      .mutable_instructions(lastId(b) - 1)
      ->mutable_reduce()
      ->set_in_place(true);
  f["inplace"] = b.fetch(0, x2);
  Outcome out = runOk(b);
  at::Tensor sum = X(0) + X(1), all = at::stack({X(0), X(1)});
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(out.reports[r].failures_size(), 0)
        << out.reports[r].failures(0).message();
    EXPECT_TRUE(at::equal(value(out, r, f["sum"]), sum));
    EXPECT_TRUE(at::allclose(value(out, r, f["avg"]), sum / 2));
    EXPECT_TRUE(at::equal(value(out, r, f["min"]), std::get<0>(all.min(0))));
    EXPECT_TRUE(at::equal(value(out, r, f["max"]), std::get<0>(all.max(0))));
    EXPECT_TRUE(at::allclose(value(out, r, f["prod"]), all.prod(0)));
    EXPECT_TRUE(at::equal(value(out, r, f["sum_scatter"]), sum[r]));
    EXPECT_TRUE(at::equal(value(out, r, f["stack"]), all));
    EXPECT_TRUE(at::equal(value(out, r, f["stack_scatter"]),
                          at::stack({X(0)[r], X(1)[r]})));
    EXPECT_TRUE(at::equal(value(out, r, f["inplace"]), sum));
  }
}

TEST(MultiGpu, ToMeshBetweenGpusIsACopy) {
  REQUIRE_GPUS(2);
  PlanBuilder b({{"gpu", 2}});
  const auto &root = b.rootView();
  int64_t gpu0 = b.mesh(root.slice("gpu", 0).value());
  int64_t gpu1 = b.mesh(root.slice("gpu", 1).value());
  int64_t x = makeCudaX(b, gpu0);
  int64_t y = b.send(gpu0, gpu1, x, meta(plan::FLOAT32, {2, 3}));
  // A later in-place change of the source does not reach the copy.
  b.op(gpu0, "aten::add_", "Scalar", {val::ref(x), val::scalar(100)}, 0);
  int64_t fy = b.fetch(gpu1, y);
  int64_t fx = b.fetch(gpu0, x);
  Outcome out = runOk(b);
  EXPECT_TRUE(at::equal(value(out, 1, fy), X(0)));
  EXPECT_TRUE(at::equal(value(out, 0, fx), X(0) + 100));
}

TEST(MultiGpu, ReduceOnACommStreamUnderAMutableBorrow) {
  REQUIRE_GPUS(2);
  PlanBuilder b({{"gpu", 2}});
  int64_t comm = b.stream("comm");
  int64_t x = makeCudaX(b);
  int64_t borrowed = borrow(b, 1, x, 0, comm, true).result;
  b.add(0, comm).mutable_borrow_first_use()->set_borrow(1);
  b.reduce(0, borrowed, meta(plan::FLOAT32, {2, 3}), {"gpu"}, plan::SUM, false,
           comm);
  b.program()
      .mutable_instructions(lastId(b) - 1)
      ->mutable_reduce()
      ->set_in_place(true);
  b.add(0, comm).mutable_borrow_last_use()->set_borrow(1);
  drop(b, 1, 0);
  // The origin stream sees the reduced value after the drop.
  int64_t doubled =
      b.op(0, "aten::mul", "Scalar", {val::ref(x), val::scalar(2)});
  int64_t fd = b.fetch(0, doubled);
  Outcome out = runOk(b);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(out.reports[r].failures_size(), 0)
        << out.reports[r].failures(0).message();
    EXPECT_TRUE(at::equal(value(out, r, fd), (X(0) + X(1)) * 2));
  }
}

/// Sets an environment variable for the workers a test starts.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name))
      previous = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (previous)
      ::setenv(name, previous->c_str(), 1);
    else
      ::unsetenv(name);
  }

private:
  const char *name;
  std::optional<std::string> previous;
};

// Two workers on one GPU (the pipeline job on a one-GPU machine): NCCL
// refuses such a communicator, so CUDA collectives go through Gloo on host
// copies and to_mesh device to device through CUDA IPC (CudaIpcTest), and
// their results are CUDA tensors again.
TEST(SharedGpu, ReduceThroughTheHostAndToMeshThroughCudaIpc) {
  REQUIRE_GPUS(1);
  ScopedEnv oneGpu("CUDA_VISIBLE_DEVICES", "0");
  PlanBuilder b({{"gpu", 2}});
  const auto &root = b.rootView();
  int64_t gpu0 = b.mesh(root.slice("gpu", 0).value());
  int64_t gpu1 = b.mesh(root.slice("gpu", 1).value());
  auto m = meta(plan::FLOAT32, {2, 3});
  int64_t x = makeCudaX(b);
  int64_t sum = b.reduce(0, x, m, {"gpu"}, plan::SUM);
  int64_t stack = b.reduce(0, x, m, {"gpu"}, plan::STACK);
  // A CUDA operand: adding a CPU tensor of this shape would fail.
  int64_t onCuda =
      b.op(0, "aten::add", "Tensor", {val::ref(sum), val::ref(x)}, 1);
  int64_t fsum = b.fetch(0, sum), fstack = b.fetch(0, stack);
  int64_t fcuda = b.fetch(0, onCuda);
  int64_t y = b.send(gpu0, gpu1, x, m);
  b.op(gpu0, "aten::add_", "Scalar", {val::ref(x), val::scalar(100)}, 0);
  int64_t fy = b.fetch(
      gpu1, b.op(gpu1, "aten::add", "Tensor", {val::ref(y), val::ref(x)}, 1));
  Outcome out = runOk(b);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(out.reports[r].failures_size(), 0)
        << out.reports[r].failures(0).message();
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(at::equal(value(out, r, fsum), X(0) + X(1)));
    EXPECT_TRUE(at::equal(value(out, r, fstack), at::stack({X(0), X(1)})));
    EXPECT_TRUE(at::equal(value(out, r, fcuda), X(0) + X(1) + X(r)));
  }
  // Rank 1 received rank 0's x before the in-place change.
  EXPECT_TRUE(at::equal(value(out, 1, fy), X(0) + X(1)));
}

} // namespace
