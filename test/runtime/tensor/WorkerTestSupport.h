//===- WorkerTestSupport.h - Running plans on tensor workers in tests -----===//
//
// Shared by the multi-process tensor tests: run a plan through a Controller
// on one worker process per rank of its root mesh, and read back fetched
// values and failures per rank.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TEST_RUNTIME_TENSOR_WORKERTESTSUPPORT_H
#define MONARCH_TEST_RUNTIME_TENSOR_WORKERTESTSUPPORT_H

#include "TensorTestSupport.h"

#include "monarch/tensor/Controller.h"
#include "monarch/tensor/Plan.h"
#include "monarch/tensor/PlanBuilder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace monarch::tensor::testing {

namespace plan = monarch::plan;

struct Outcome {
  std::vector<std::string> procFailures;
  std::vector<plan::RunReport> reports; ///< by rank
};

/// Runs `program` on a fresh controller's worker processes, one per rank of
/// the program's root mesh; every wait is bounded, so a hang fails the test
/// instead of blocking it.
inline Outcome runPlanOnWorkers(const plan::Program &program) {
  Outcome o;
  ControllerOptions options;
  for (const auto &d : program.root())
    options.shape.emplace_back(d.name(), d.size());
  const int kRanks = static_cast<int>(std::accumulate(
      program.root().begin(), program.root().end(), int64_t{1},
      [](int64_t n, const plan::MeshDim &d) { return n * d.size(); }));
  options.timeout = std::chrono::seconds(20);
  auto controller = Controller::start(options);
  if (!controller.ok()) {
    ADD_FAILURE() << controller.status().message();
    return o;
  }
  auto result = runPlan(**controller, program);
  if (!result.ok()) {
    ADD_FAILURE() << result.status().message();
    return o;
  }
  o.procFailures = result->procFailures;
  o.reports.resize(kRanks);
  for (int r = 0; r < kRanks; ++r)
    o.reports[r].set_rank(r);
  for (const auto &f : result->fetches)
    *o.reports.at(f.rank()).add_fetches() = f;
  for (const auto &f : result->failures)
    *o.reports.at(f.rank()).add_failures() = f;
  EXPECT_TRUE((*controller)->stop().isOk());
  return o;
}

inline Outcome runOk(const PlanBuilder &b) {
  Outcome o = runPlanOnWorkers(b.program());
  EXPECT_TRUE(o.procFailures.empty()) << o.procFailures.front();
  size_t ranks = static_cast<size_t>(b.rootView().size());
  if (o.reports.size() != ranks)
    o.reports.resize(ranks);
  return o;
}

inline const plan::FetchReply *reply(const Outcome &o, int rank,
                                     int64_t fetch) {
  for (const auto &f : o.reports[rank].fetches())
    if (f.instruction() == fetch)
      return &f;
  return nullptr;
}

inline at::Tensor value(const Outcome &o, int rank, int64_t fetch) {
  const auto *f = reply(o, rank, fetch);
  if (!f || !f->has_value()) {
    ADD_FAILURE() << "rank " << rank << " fetch " << fetch << ": "
                  << (f ? f->error().message() : "no reply");
    return at::zeros({0});
  }
  return toTensor(f->value());
}

inline int failuresOf(const Outcome &o, int rank, int64_t instruction,
                      const std::string &contains = "") {
  int n = 0;
  for (const auto &f : o.reports[rank].failures())
    if (f.instruction() == instruction) {
      ++n;
      EXPECT_NE(f.message().find(contains), std::string::npos) << f.message();
    }
  return n;
}

inline int64_t lastId(const PlanBuilder &b) {
  const auto &insts = b.program().instructions();
  return insts.Get(insts.size() - 1).id();
}

// Per-rank input: X(r) = arange(6).view(2,3) + 10 r.
inline at::Tensor X(int r) {
  return at::arange(6, at::kFloat).view({2, 3}) + 10.f * r;
}
inline int64_t makeX(PlanBuilder &b, int64_t mesh = 0) {
  int64_t r = b.rank(mesh, {});
  int64_t r10 =
      b.op(mesh, "aten::mul", "Scalar", {val::ref(r), val::scalar(10)});
  return b.op(
      mesh, "aten::add", "Tensor",
      {constant(at::arange(6, at::kFloat).view({2, 3})), val::ref(r10)});
}

} // namespace monarch::tensor::testing

#endif // MONARCH_TEST_RUNTIME_TENSOR_WORKERTESTSUPPORT_H
