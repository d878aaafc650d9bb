//===- GraphSegmentsTest.cpp - How a recording splits into CUDA graphs ----===//
//
// segmentBody() (runtime/tensor/lib/cuda/GraphSegments.h) on bodies written
// as frame indexes: what is captured, what runs op by op, and what each
// captured segment reads, writes back, frees and leaves bound. CUDA-free: it
// runs everywhere; CudaExecutorTest's CudaGraphs tests run the result. Also
// the switch a worker reads: cudaGraphsSetting (TensorWorker.h).
//
//===----------------------------------------------------------------------===//

#include "../../../runtime/tensor/lib/cuda/GraphSegments.h"

#include "monarch/tensor/TensorWorker.h"
#include "monarch/tensor/plan.pb.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

using namespace monarch::tensor::detail;
using Cells = std::vector<uint32_t>;

namespace {

StepAccess call(std::string_view op, Cells reads, Cells defines,
                Cells writes = {}) {
  StepAccess s;
  s.op = op;
  s.reads = std::move(reads);
  s.defines = std::move(defines);
  s.writes = std::move(writes);
  return s;
}

StepAccess del(Cells frees) {
  StepAccess s;
  s.frees = std::move(frees);
  return s;
}

} // namespace

TEST(GraphSegments, HostSyncsAreKnownByNameWhateverTheOverload) {
  EXPECT_TRUE(hostSyncOp("aten::item"));
  EXPECT_TRUE(hostSyncOp("aten::nonzero.out"));
  EXPECT_TRUE(hostSyncOp("aten::_local_scalar_dense"));
  EXPECT_FALSE(hostSyncOp("aten::add.Tensor"));
  EXPECT_FALSE(hostSyncOp("aten::mm"));
  // A cast or copy on the device is captured; one to the CPU is found when
  // the call runs (the executor's warm-up and capture checks).
  EXPECT_FALSE(hostSyncOp("aten::to.dtype"));
  EXPECT_FALSE(hostSyncOp("aten::copy_"));
  EXPECT_FALSE(hostSyncOp("aten::itemsize")); // a prefix is not the name
}

// Frame: 0, 1 formals; 2 the result; 3, 4 locals.
TEST(GraphSegments, AStraightLineBodyIsOneGraph) {
  std::vector<StepAccess> body = {
      call("aten::mul.Tensor", {0, 1}, {3}),
      call("aten::add.Tensor", {3, 0}, {4}),
      del({3}),
      call("aten::neg", {4}, {2}),
      del({4}),
  };
  auto segments = segmentBody(body, 2);
  ASSERT_EQ(segments.size(), 1u);
  const GraphSegment &s = segments[0];
  EXPECT_TRUE(s.captured);
  EXPECT_EQ(s.begin, 0u);
  EXPECT_EQ(s.end, body.size());
  EXPECT_EQ(s.inputs, (Cells{0, 1}));
  EXPECT_TRUE(s.writtenInputs.empty());
  EXPECT_EQ(s.outputs, (Cells{2})); // the locals are freed inside
  EXPECT_EQ(s.frees, (Cells{3, 4}));
}

TEST(GraphSegments, AHostSyncSplitsTheBodyAndRunsOpByOp) {
  std::vector<StepAccess> body = {
      call("aten::mul.Tensor", {0, 1}, {3}),
      call("aten::add.Tensor", {3, 0}, {4}),
      call("aten::nonzero", {4}, {5}),
      call("aten::add.Tensor", {5, 5}, {6}),
      call("aten::neg", {6}, {2}),
  };
  auto segments = segmentBody(body, 2);
  ASSERT_EQ(segments.size(), 3u);
  EXPECT_TRUE(segments[0].captured);
  EXPECT_EQ(segments[0].end, 2u);
  // Locals the rest of the body reads stay bound after the first graph.
  EXPECT_EQ(segments[0].outputs, (Cells{3, 4}));
  EXPECT_FALSE(segments[1].captured);
  EXPECT_EQ(segments[1].begin, 2u);
  EXPECT_EQ(segments[1].end, 3u);
  EXPECT_TRUE(segments[2].captured);
  EXPECT_EQ(segments[2].inputs, (Cells{5}));
  EXPECT_EQ(segments[2].outputs, (Cells{6, 2}));
}

TEST(GraphSegments, RunsShorterThanTheMinimumJoinTheOpByOpParts) {
  std::vector<StepAccess> body = {
      call("aten::mul.Tensor", {0, 1}, {3}),
      call("aten::item", {3}, {4}),
      call("aten::add.Tensor", {3, 4}, {5}),
      call("aten::item", {5}, {6}),
      call("aten::neg", {3}, {2}),
  };
  auto segments = segmentBody(body, 2);
  ASSERT_EQ(segments.size(), 1u); // nothing long enough: one op-by-op part
  EXPECT_FALSE(segments[0].captured);
  EXPECT_EQ(segments[0].begin, 0u);
  EXPECT_EQ(segments[0].end, body.size());
  // With a minimum of one call each lone call is a graph of its own.
  auto ones = segmentBody(body, 1);
  ASSERT_EQ(ones.size(), 5u);
  EXPECT_TRUE(ones[0].captured);
  EXPECT_FALSE(ones[1].captured);
  EXPECT_TRUE(ones[2].captured);
}

TEST(GraphSegments, InPlaceWritesToInputsAreCopiedBack) {
  // A formal updated in place (an optimizer step) and a local made before
  // the segment and written in it.
  std::vector<StepAccess> body = {
      call("aten::item", {1}, {3}),
      call("aten::mul_.Tensor", {0, 1}, {}, {0}),
      call("aten::add_.Tensor", {3, 0}, {}, {3}),
      call("aten::neg", {0}, {2}),
  };
  auto segments = segmentBody(body, 2);
  ASSERT_EQ(segments.size(), 2u);
  const GraphSegment &s = segments[1];
  ASSERT_TRUE(s.captured);
  EXPECT_EQ(s.inputs, (Cells{0, 1, 3}));
  EXPECT_EQ(s.writtenInputs, (Cells{0, 3}));
  EXPECT_EQ(s.outputs, (Cells{2}));
}

TEST(GraphSegments, AnInputFreedInsideIsClearedAfterTheReplay) {
  std::vector<StepAccess> body = {
      call("aten::item", {0}, {3}),
      call("aten::mul.Tensor", {3, 1}, {4}),
      del({3}),
      call("aten::add.Tensor", {4, 1}, {2}),
  };
  auto segments = segmentBody(body, 2);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[1].inputs, (Cells{3, 1}));
  EXPECT_EQ(segments[1].frees, (Cells{3}));
  EXPECT_EQ(segments[1].outputs, (Cells{4, 2}));
}

TEST(GraphSegments, ARedefinedLocalIsAnOutputOnceWithItsLastValue) {
  std::vector<StepAccess> body = {
      call("aten::mul.Tensor", {0, 1}, {3}),
      del({3}),
      call("aten::add.Tensor", {0, 1}, {3}),
      call("aten::neg", {3}, {2}),
  };
  auto segments = segmentBody(body, 2);
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].outputs, (Cells{3, 2}));
}

TEST(GraphSegments, DeletionsAloneAreNoGraph) {
  auto segments = segmentBody({del({3}), del({4})}, 1);
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_FALSE(segments[0].captured);
  EXPECT_TRUE(segmentBody({}, 2).empty());
}

// On by default; MONARCH_CUDA_GRAPHS=off turns it off; the controller's word
// (monarch-run --cuda-graphs) beats the environment either way; a value that
// is neither on nor off keeps the default.
TEST(CudaGraphsSetting, DefaultOnEnvironmentOffControllerFirst) {
  using monarch::tensor::cudaGraphsSetting;
  using monarch::plan::WorkerConfig;
  const char *was = std::getenv("MONARCH_CUDA_GRAPHS");
  std::optional<std::string> saved;
  if (was)
    saved = was;
  WorkerConfig unset, on, off;
  on.set_cuda_graphs(true);
  off.set_cuda_graphs(false);

  ::unsetenv("MONARCH_CUDA_GRAPHS");
  EXPECT_TRUE(cudaGraphsSetting(unset));
  EXPECT_FALSE(cudaGraphsSetting(off));
  ::setenv("MONARCH_CUDA_GRAPHS", "off", 1);
  EXPECT_FALSE(cudaGraphsSetting(unset));
  EXPECT_TRUE(cudaGraphsSetting(on));
  ::setenv("MONARCH_CUDA_GRAPHS", "on", 1);
  EXPECT_TRUE(cudaGraphsSetting(unset));
  EXPECT_FALSE(cudaGraphsSetting(off));
  ::setenv("MONARCH_CUDA_GRAPHS", "sometimes", 1);
  EXPECT_TRUE(cudaGraphsSetting(unset));

  if (saved)
    ::setenv("MONARCH_CUDA_GRAPHS", saved->c_str(), 1);
  else
    ::unsetenv("MONARCH_CUDA_GRAPHS");
}
