//===- CrossHostGpuTest.cpp - NCCL between two hosts' GPUs ----------------===//
//
// Run by loopback-gpu-hosts.sh (ctest runtime.MultiHostGpuLoopback; on the
// GPU machine through scripts/gpu-check.sh): two host agents on loopback,
// each seeing one GPU of its own as its GPU 0. monarch-run attaches to both
// and all-reduces CUDA tensors over the hosts dim. Each host's worker is on
// device index 0, yet the GPUs differ, so the communicator must be NCCL's
// (not host-staged Gloo, which is for workers sharing a GPU); the workers'
// debug lines, forwarded by the agents to monarch-run's output with their
// rank and host, say which way it went. Skips elsewhere.
//
//===----------------------------------------------------------------------===//

#include "CommandSupport.h"

#include "monarch/tensor/PlanBuilder.h"
#include "monarch/tensor/TempDir.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/wait.h>

using namespace monarch;
using monarch::test::runCommand;
using monarch::test::splitList;

TEST(CrossHostGpu, AllReduceOfCudaTensorsGoesThroughNcclAcrossHosts) {
  auto addrs = splitList(std::getenv("MONARCH_TEST_GPU_HOSTS"));
  auto names = splitList(std::getenv("MONARCH_TEST_GPU_HOST_NAMES"));
  const char *secret = std::getenv("MONARCH_TEST_SECRET_FILE");
  if (addrs.size() != 2 || names.size() != 2 || !secret)
    GTEST_SKIP() << "run through test/runtime/multihost/loopback-gpu-hosts.sh "
                    "on a machine with 2 GPUs";
  tensor::TempDir tmp("gpuhosts");
  // Each rank's (rank + 1) * [1, 1, 1, 1] on its GPU, summed over the hosts.
  tensor::PlanBuilder b({{"hosts", 2}, {"gpu", 1}});
  int64_t r = b.rank(0, {"hosts", "gpu"});
  int64_t ones = b.op(0, "aten::ones", "", {tensor::val::ints({4})});
  int64_t scale = b.op(0, "aten::add", "Scalar",
                       {tensor::val::ref(r), tensor::val::scalarInt(1)});
  int64_t host = b.op(0, "aten::mul", "Tensor",
                      {tensor::val::ref(ones), tensor::val::ref(scale)});
  int64_t x = b.op(0, "aten::to", "device",
                   {tensor::val::ref(host), tensor::val::device("cuda"),
                    tensor::val::dtype(plan::FLOAT32)});
  int64_t sum =
      b.reduce(0, x, tensor::meta(plan::FLOAT32, {4}), {"hosts"}, plan::SUM);
  b.fetch(0, sum);
  std::string planPath = tmp.file("allreduce.plan");
  std::ofstream(planPath, std::ios::binary) << b.serialize();

  auto [rc, out] = runCommand(std::string(MONARCH_RUN_BIN) + " " + planPath +
                              " --hosts " + addrs[0] + "," + addrs[1] +
                              " --secret-file " + secret + " --timeout 120");
  ASSERT_EQ(rc, 0) << out;
  // 1 + 2 on every element, on both hosts.
  for (int rank = 0; rank < 2; ++rank) {
    std::string where = "rank " + std::to_string(rank) +
                        " (hosts=" + std::to_string(rank) + ", gpu=0): ";
    EXPECT_NE(out.find(where + "tensor<4xf32> [3, 3, 3, 3]"), std::string::npos)
        << where << "\n"
        << out;
  }
  // Both workers chose NCCL for the hosts communicator, and said so through
  // their host's agent: "[NAME rank R on gh<R>] monarch debug: cuda: ...".
  for (int rank = 0; rank < 2; ++rank) {
    std::regex chose("rank " + std::to_string(rank) + " on " + names[rank] +
                     "\\] monarch debug: cuda: communicator .* of 2 ranks: "
                     "NCCL \\(every member on its own GPU\\)");
    EXPECT_TRUE(std::regex_search(out, chose))
        << "rank " << rank << " on " << names[rank] << "\n"
        << out;
  }
  EXPECT_EQ(out.find("host-staged"), std::string::npos) << out;
  // What ran where, for scripts/gpu-check.sh's summary.
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.find("cuda: communicator") != std::string::npos ||
        line.rfind("fetch #", 0) == 0)
      std::printf("%s\n", line.c_str());
}
