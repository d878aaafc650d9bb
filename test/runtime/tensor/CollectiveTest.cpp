//===- CollectiveTest.cpp - reduce and to_mesh across 4 processes ---------===//
//
// Each test builds a plan, runs it through a Controller on 4 tensor-worker
// processes of a host=2 x gpu=2 mesh (TensorWorker actors, Gloo), and checks
// every rank's fetched values against the same computation in local libtorch.
//
//===----------------------------------------------------------------------===//

#include "WorkerTestSupport.h"

#include "monarch/tensor/Controller.h"
#include "monarch/tensor/Plan.h"
#include "monarch/tensor/PlanBuilder.h"
#include "monarch/tensor/TempDir.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace monarch::tensor;
using namespace monarch::tensor::testing;
namespace plan = monarch::plan;

namespace {

constexpr int kRanks = 4;

/// makeX on another stream.
int64_t makeXOn(PlanBuilder &b, int64_t stream) {
  auto &rt = b.add(0, stream);
  int64_t r = b.ref();
  rt.mutable_rank_tensor()->set_result(r);
  int64_t r10 =
      b.op(0, "aten::mul", "Scalar", {val::ref(r), val::scalar(10)}, 1, stream);
  return b.op(0, "aten::add", "Tensor",
              {constant(at::arange(6, at::kFloat).view({2, 3})), val::ref(r10)},
              1, stream);
}

// Communicators of the 2x2 mesh: over gpu {0,1},{2,3}; over host {0,2},{1,3}.
std::vector<int> group(int rank, const std::string &dim) {
  if (dim == "gpu")
    return {rank / 2 * 2, rank / 2 * 2 + 1};
  if (dim == "host")
    return {rank % 2, rank % 2 + 2};
  return {0, 1, 2, 3};
}
int indexIn(int rank, const std::string &dim) {
  return dim == "gpu" ? rank % 2 : dim == "host" ? rank / 2 : rank;
}

TEST(Collectives, EveryReduceRowMatchesLocalTorch) {
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  auto m = meta(plan::FLOAT32, {2, 3});
  int64_t x = makeX(b);
  std::map<std::string, int64_t> f;
  f["sum_gpu"] = b.fetch(0, b.reduce(0, x, m, {"gpu"}, plan::SUM));
  f["avg_host"] = b.fetch(0, b.reduce(0, x, m, {"host"}, plan::AVG));
  f["min_all"] = b.fetch(0, b.reduce(0, x, m, {}, plan::MIN));
  f["max_all"] = b.fetch(0, b.reduce(0, x, m, {}, plan::MAX));
  f["prod_all"] = b.fetch(0, b.reduce(0, x, m, {}, plan::PRODUCT));
  f["sum_scatter_gpu"] =
      b.fetch(0, b.reduce(0, x, m, {"gpu"}, plan::SUM, true));
  f["max_scatter_host"] =
      b.fetch(0, b.reduce(0, x, m, {"host"}, plan::MAX, true));
  f["stack_gpu"] = b.fetch(0, b.reduce(0, x, m, {"gpu"}, plan::STACK));
  f["stack_scatter_host"] =
      b.fetch(0, b.reduce(0, x, m, {"host"}, plan::STACK, true));
  // In place.
  int64_t x2 = b.op(0, "aten::clone", "", {val::ref(x)});
  b.reduce(0, x2, m, {"host"}, plan::SUM);
  b.program()
      .mutable_instructions(lastId(b) - 1)
      ->mutable_reduce()
      ->set_in_place(true);
  f["inplace_host"] = b.fetch(0, x2);
  // out=.
  int64_t o = b.op(0, "aten::zeros", "", {val::ints({2, 3})});
  int64_t ro = b.reduce(0, x, m, {"gpu"}, plan::SUM);
  b.program().mutable_instructions(lastId(b) - 1)->mutable_reduce()->set_out(o);
  f["out"] = b.fetch(0, o);
  f["out_result"] = b.fetch(0, ro);
  // Integer reductions: avg truncates, product over gpu.
  int64_t ri = b.rank(0, {});
  auto mi = meta(plan::INT64, {});
  f["avg_int"] = b.fetch(0, b.reduce(0, ri, mi, {}, plan::AVG));
  int64_t ri1 =
      b.op(0, "aten::add", "Scalar", {val::ref(ri), val::scalarInt(1)});
  f["prod_int_gpu"] = b.fetch(0, b.reduce(0, ri1, mi, {"gpu"}, plan::PRODUCT));

  // A second stream has its own communicators: its reduces interleave with
  // the default stream's without mixing up their messages.
  int64_t comm = b.stream("comm");
  int64_t xs = makeXOn(b, comm);
  std::vector<int64_t> streamFetches;
  for (int k = 0; k < 3; ++k) {
    int64_t a = b.reduce(0, xs, m, {"gpu"}, plan::SUM, false, comm);
    streamFetches.push_back(b.fetch(0, a, comm));
    b.reduce(0, x, m, {"host"}, plan::MAX); // default stream, in between
  }
  Outcome out = runOk(b);
  ASSERT_EQ(out.reports.size(), size_t(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(out.reports[r].failures_size(), 0)
        << out.reports[r].failures(0).message();
    for (int64_t sf : streamFetches)
      EXPECT_TRUE(at::equal(value(out, r, sf),
                            X(group(r, "gpu")[0]) + X(group(r, "gpu")[1])));
    auto sumOf = [&](const std::string &dim) {
      at::Tensor s = at::zeros({2, 3});
      for (int g : group(r, dim))
        s += X(g);
      return s;
    };
    at::Tensor all = at::stack({X(0), X(1), X(2), X(3)});
    EXPECT_TRUE(at::equal(value(out, r, f["sum_gpu"]), sumOf("gpu")));
    EXPECT_TRUE(at::allclose(value(out, r, f["avg_host"]), sumOf("host") / 2));
    EXPECT_TRUE(
        at::equal(value(out, r, f["min_all"]), std::get<0>(all.min(0))));
    EXPECT_TRUE(
        at::equal(value(out, r, f["max_all"]), std::get<0>(all.max(0))));
    EXPECT_TRUE(at::allclose(value(out, r, f["prod_all"]), all.prod(0)));
    EXPECT_TRUE(at::equal(value(out, r, f["sum_scatter_gpu"]),
                          sumOf("gpu")[indexIn(r, "gpu")]));
    at::Tensor hostMax =
        at::max(X(group(r, "host")[0]), X(group(r, "host")[1]));
    EXPECT_TRUE(at::equal(value(out, r, f["max_scatter_host"]),
                          hostMax[indexIn(r, "host")]));
    auto g = group(r, "gpu");
    EXPECT_TRUE(at::equal(value(out, r, f["stack_gpu"]),
                          at::stack({X(g[0]), X(g[1])})));
    auto h = group(r, "host");
    int me = indexIn(r, "host");
    EXPECT_TRUE(at::equal(value(out, r, f["stack_scatter_host"]),
                          at::stack({X(h[0])[me], X(h[1])[me]})));
    EXPECT_TRUE(at::equal(value(out, r, f["inplace_host"]), sumOf("host")));
    EXPECT_TRUE(at::equal(value(out, r, f["out"]), sumOf("gpu")));
    EXPECT_TRUE(at::equal(value(out, r, f["out_result"]), sumOf("gpu")));
    EXPECT_EQ(value(out, r, f["avg_int"]).item<int64_t>(), (0 + 1 + 2 + 3) / 4);
    EXPECT_EQ(value(out, r, f["prod_int_gpu"]).item<int64_t>(),
              (g[0] + 1) * (g[1] + 1));
  }
}

TEST(Collectives, ReduceErrorCasesFailEverywhereWithoutHanging) {
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t x = makeX(b);
  auto m = meta(plan::FLOAT32, {2, 3});
  std::vector<std::pair<int64_t, std::string>> cases;
  b.reduce(0, x, m, {}, plan::STACK);
  cases.emplace_back(lastId(b), "exactly one dim");
  b.reduce(0, x, m, {"host", "gpu"}, plan::SUM, true);
  cases.emplace_back(lastId(b), "exactly one dim");
  int64_t y = b.op(0, "aten::ones", "", {val::ints({3, 3})});
  b.reduce(0, y, meta(plan::FLOAT32, {3, 3}), {"gpu"}, plan::SUM, true);
  cases.emplace_back(lastId(b), "shape[0] == 2");
  // A rejected in-place reduce marks its (mutated) input as an error, like
  // any failed in-place instruction: use a scratch copy.
  int64_t scratch = b.op(0, "aten::clone", "", {val::ref(x)});
  b.reduce(0, scratch, m, {"gpu"}, plan::SUM, true);
  b.program()
      .mutable_instructions(lastId(b) - 1)
      ->mutable_reduce()
      ->set_in_place(true);
  cases.emplace_back(lastId(b), "only supported without scatter");
  b.reduce(0, scratch, m, {"gpu"}, plan::STACK);
  b.program()
      .mutable_instructions(lastId(b) - 1)
      ->mutable_reduce()
      ->set_in_place(true);
  cases.emplace_back(lastId(b), "in-place stack");
  int64_t o = b.op(0, "aten::zeros", "", {val::ints({3})});
  int64_t bad = b.reduce(0, x, m, {"gpu"}, plan::SUM);
  b.program().mutable_instructions(lastId(b) - 1)->mutable_reduce()->set_out(o);
  cases.emplace_back(lastId(b), "out= has dtype");
  int64_t fbad = b.fetch(0, bad);
  // Planned shape differs from the actual tensor on every rank.
  b.reduce(0, x, meta(plan::FLOAT32, {6}), {"gpu"}, plan::SUM);
  cases.emplace_back(lastId(b), "took part with zeros");
  // Afterwards the communicators are still in step.
  int64_t fine = b.fetch(0, b.reduce(0, x, m, {}, plan::SUM));
  Outcome out = runOk(b);
  ASSERT_EQ(out.reports.size(), size_t(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    for (const auto &[id, text] : cases)
      EXPECT_EQ(failuresOf(out, r, id, text), 1) << "instruction " << id;
    EXPECT_EQ(out.reports[r].failures_size(), int(cases.size()));
    const auto *e = reply(out, r, fbad);
    ASSERT_TRUE(e && e->has_error());
    EXPECT_EQ(value(out, r, fine).sum().item<float>(),
              (X(0) + X(1) + X(2) + X(3)).sum().item<float>());
  }
}

TEST(Collectives, ErroredInputTakesPartAndTheResultIsAnErrorEverywhere) {
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t r = b.rank(0, {});
  int64_t idx = b.op(0, "aten::reshape", "", {val::ref(r), val::ints({1})});
  // Index 2 and 3 are out of range: ranks 2 and 3 fail here.
  int64_t sel =
      b.op(0, "aten::index_select", "",
           {constant(at::tensor({5.f, 7.f})), val::i(0), val::ref(idx)});
  int64_t selId = lastId(b);
  int64_t red = b.reduce(0, sel, meta(plan::FLOAT32, {1}), {}, plan::SUM);
  int64_t redId = lastId(b);
  int64_t fred = b.fetch(0, red);
  int64_t ones = b.op(0, "aten::ones", "", {val::ints({1})});
  int64_t fafter =
      b.fetch(0, b.reduce(0, ones, meta(plan::FLOAT32, {1}), {}, plan::SUM));
  Outcome out = runOk(b);
  ASSERT_EQ(out.reports.size(), size_t(kRanks));
  for (int k = 0; k < kRanks; ++k) {
    SCOPED_TRACE("rank " + std::to_string(k));
    EXPECT_EQ(failuresOf(out, k, redId), 0); // dependent: not reported again
    if (k < 2) {
      // Not 5 + 7 + 0 + 0: the result is an error here too, pointing at the
      // first errored member's root failure, and nothing new is reported.
      EXPECT_EQ(out.reports[k].failures_size(), 0);
      const auto *e = reply(out, k, fred);
      ASSERT_TRUE(e && e->has_error());
      EXPECT_EQ(e->error().instruction(), selId);
      EXPECT_EQ(e->error().rank(), 2);
    } else {
      EXPECT_EQ(failuresOf(out, k, selId, "out of range"), 1);
      EXPECT_EQ(out.reports[k].failures_size(), 1);
      const auto *e = reply(out, k, fred);
      ASSERT_TRUE(e && e->has_error());
      EXPECT_EQ(e->error().instruction(), selId);
      EXPECT_EQ(e->error().rank(), k);
    }
    EXPECT_EQ(value(out, k, fafter).item<float>(), 4.f);
  }
}

TEST(Collectives, AnErroredInputOfAHugePlannedShapeFailsEverywhereAtOnce) {
  // The plan says [2^40, 4] floats (16 TiB); the inputs are not that, so
  // every rank's input is an error. Taking part with zeros of that shape
  // cannot be allocated: the members learn of the errors first and none
  // moves data, so the result is an error everywhere at once (it used to
  // leave the peers waiting out the whole timeout), and the communicator
  // stays in step for the next reduce.
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t small = b.op(0, "aten::ones", "", {val::ints({2})});
  int64_t huge = b.reduce(0, small, meta(plan::FLOAT32, {int64_t{1} << 40, 4}),
                          {}, plan::SUM);
  int64_t fhuge = b.fetch(0, huge);
  int64_t fafter = b.fetch(
      0, b.reduce(0, small, meta(plan::FLOAT32, {2}), {}, plan::SUM));
  auto start = std::chrono::steady_clock::now();
  Outcome out = runOk(b);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  ASSERT_EQ(out.reports.size(), size_t(kRanks));
  for (int k = 0; k < kRanks; ++k) {
    SCOPED_TRACE("rank " + std::to_string(k));
    const auto *e = reply(out, k, fhuge);
    ASSERT_TRUE(e && e->has_error());
    EXPECT_NE(e->error().message().find("the plan says"), std::string::npos)
        << e->error().message();
    EXPECT_TRUE(at::equal(value(out, k, fafter), at::full({2}, 4.f)));
  }
}

TEST(Collectives, ToMeshAcrossSlicesBroadcastAndCopySemantics) {
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  const auto &root = b.rootView();
  int64_t stage0 = b.mesh(root.slice("host", 0).value());
  int64_t stage1 = b.mesh(root.slice("host", 1).value());
  auto m = meta(plan::FLOAT32, {2, 3});
  // Pipeline: stage 0 computes, stage 1 receives.
  int64_t x = makeX(b, stage0);
  int64_t y = b.send(stage0, stage1, x, m);
  b.op(stage0, "aten::add_", "Scalar", {val::ref(x), val::scalar(100)}, 0);
  int64_t fy = b.fetch(stage1, y);
  // Broadcast over the missing host dim: (h, g) gets stage 0's (0, g).
  int64_t z = b.send(stage0, 0, x, m);
  int64_t fz = b.fetch(0, z);
  // Same-process copy (root -> root) is a copy too.
  int64_t w = makeX(b);
  int64_t w2 = b.send(0, 0, w, m);
  b.op(0, "aten::mul_", "Scalar", {val::ref(w), val::scalar(0)}, 0);
  int64_t fw2 = b.fetch(0, w2);
  // Errored input on rank 1 only: rank 3 receives an error, nobody hangs.
  int64_t g = b.rank(stage0, {"gpu"});
  int64_t gi = b.op(stage0, "aten::reshape", "", {val::ref(g), val::ints({1})});
  int64_t e = b.op(stage0, "aten::index_select", "",
                   {constant(at::tensor({9.f})), val::i(0), val::ref(gi)});
  int64_t eId = lastId(b);
  int64_t ey = b.send(stage0, stage1, e, meta(plan::FLOAT32, {1}));
  int64_t fey = b.fetch(stage1, ey);
  // A source dim missing from the destination is an error on all members.
  b.send(0, stage0, w, m);
  int64_t badSend = lastId(b);
  Outcome out = runOk(b);
  ASSERT_EQ(out.reports.size(), size_t(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    int h = r / 2, gpu = r % 2;
    if (h == 1) {
      EXPECT_TRUE(at::equal(value(out, r, fy), X(gpu)));
      const auto *ef = reply(out, r, fey);
      ASSERT_TRUE(ef);
      if (gpu == 0) {
        EXPECT_TRUE(ef->has_value());
      } else {
        ASSERT_TRUE(ef->has_error());
        EXPECT_EQ(ef->error().instruction(), eId);
        EXPECT_EQ(ef->error().rank(), 1);
      }
    }
    // Sent after `x += 100` was queued? No: the send precedes it.
    EXPECT_TRUE(at::equal(value(out, r, fz), X(gpu) + 100));
    EXPECT_TRUE(at::equal(value(out, r, fw2), X(r)));
    EXPECT_EQ(failuresOf(out, r, badSend, "source dim 'host' does not exist"),
              1);
    EXPECT_EQ(failuresOf(out, r, eId), r == 1 ? 1 : 0);
  }
}

TEST(Collectives, FetchFromEveryCoordinate) {
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t x = makeX(b);
  std::map<int, int64_t> fetches;
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 2; ++g) {
      auto point =
          b.rootView().slice("host", h).value().slice("gpu", g).value();
      fetches[h * 2 + g] = b.fetch(b.mesh(point), x);
    }
  Outcome out = runOk(b);
  ASSERT_EQ(out.reports.size(), size_t(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(out.reports[r].fetches_size(), 1) << "rank " << r;
    EXPECT_TRUE(at::equal(value(out, r, fetches[r]), X(r)));
  }
}

/// Runs monarch-run with `args`; returns its exit status and output.
std::pair<int, std::string> monarchRun(const std::string &args) {
  std::string command = std::string(MONARCH_RUN_BIN) + " " + args + " 2>&1";
  std::FILE *pipe = ::popen(command.c_str(), "r");
  std::string output;
  char chunk[4096];
  while (size_t n = std::fread(chunk, 1, sizeof(chunk), pipe))
    output.append(chunk, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, output};
}

TEST(MonarchRun, RefusesCorruptedAndFuturePlansWithoutLaunching) {
  TempDir tmp("plans");
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  b.op(0, "aten::ones", "", {val::ints({1})});
  std::string bytes = b.serialize();
  std::ofstream(tmp.file("corrupted.plan"), std::ios::binary)
      << bytes.substr(0, bytes.size() - 3);
  b.program().set_version(kPlanVersion + 5);
  std::ofstream(tmp.file("future.plan"), std::ios::binary) << b.serialize();

  auto [rc1, out1] = monarchRun(tmp.file("corrupted.plan"));
  EXPECT_EQ(rc1, 2);
  EXPECT_NE(out1.find("corrupted plan"), std::string::npos) << out1;
  auto [rc2, out2] = monarchRun(tmp.file("future.plan"));
  EXPECT_EQ(rc2, 2);
  EXPECT_NE(out2.find("is newer than this runtime supports"), std::string::npos)
      << out2;
  // Nothing was launched: no worker ever printed.
  EXPECT_EQ(out1.find("tensor_procs"), std::string::npos) << out1;
}

TEST(MonarchRun, RefusesMeshesTooLargeForTheHostOrForAnyMesh) {
  TempDir tmp("plans");
  // 2^40 ranks (used to abort with std::bad_alloc, rc 134), 2^31 - 1 (took
  // 27 s and 17 GB to refuse) and 100,000 (valid as a mesh, but more procs
  // than this host may start: it used to fork them all).
  for (int64_t size : {int64_t{1} << 40, int64_t{2147483647}, int64_t{100000}}) {
    SCOPED_TRACE(size);
    PlanBuilder b({{"gpu", 2}});
    b.op(0, "aten::ones", "", {val::ints({1})});
    b.program().mutable_root(0)->set_size(size);
    std::ofstream(tmp.file("big.plan"), std::ios::binary) << b.serialize();
    auto start = std::chrono::steady_clock::now();
    auto [rc, out] = monarchRun(tmp.file("big.plan"));
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(10));
    EXPECT_EQ(rc, 2) << out;
    if (size > monarch::mesh::kMaxMeshRanks)
      EXPECT_NE(out.find("a mesh holds at most 1048576 ranks"),
                std::string::npos)
          << out;
    else
      EXPECT_NE(out.find("MONARCH_MAX_PROCS_PER_HOST"), std::string::npos)
          << out;
    EXPECT_EQ(out.find("tensor_procs rank"), std::string::npos) << out;
  }
}

TEST(MonarchRun, PrintsFetchesInProgramOrderAndFailsOnAFailedFetch) {
  TempDir tmp("plans");
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t x = makeX(b);
  b.fetch(0, x);
  // A failing op (shape mismatch) and a fetch of its result.
  int64_t bad = b.op(0, "aten::mm", "", {val::ref(x), val::ref(x)});
  b.fetch(0, bad);
  std::ofstream(tmp.file("p.plan"), std::ios::binary) << b.serialize();
  auto [rc, out] = monarchRun(tmp.file("p.plan") + " --procs host=2,gpu=2 " +
                              "--trace " + tmp.file("trace.json"));
  EXPECT_EQ(rc, 1) << out;
  // Rank order within a fetch, all of the first fetch before the second.
  size_t at = 0;
  for (int r = 0; r < kRanks; ++r) {
    std::string line =
        "rank " + std::to_string(r) + " (host=" + std::to_string(r / 2) +
        ", gpu=" + std::to_string(r % 2) + "): tensor<2x3xf32> [[" +
        std::to_string(10 * r) + ", " + std::to_string(10 * r + 1);
    size_t found = out.find(line, at);
    ASSERT_NE(found, std::string::npos) << line << "\n" << out;
    at = found;
  }
  EXPECT_NE(out.find("error: instruction #", at), std::string::npos) << out;
  EXPECT_NE(out.find("mat1 and mat2 shapes cannot be multiplied"),
            std::string::npos)
      << out;
  std::ifstream trace(tmp.file("trace.json"));
  std::stringstream text;
  text << trace.rdbuf();
  EXPECT_NE(text.str().find("\"traceEvents\""), std::string::npos);
}

TEST(MonarchRun, ProcsMustMatchThePlan) {
  TempDir tmp("plans");
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  std::ofstream(tmp.file("p.plan"), std::ios::binary) << b.serialize();
  auto [rc, out] = monarchRun(tmp.file("p.plan") + " --procs gpu=4");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("compiled for procs host=2,gpu=2"), std::string::npos)
      << out;
}

/// A controller of the host=2 x gpu=2 test mesh, driven by hand.
Expected<std::unique_ptr<Controller>> startController() {
  ControllerOptions options;
  options.shape = {{"host", 2}, {"gpu", 2}};
  options.timeout = std::chrono::seconds(20);
  return Controller::start(options);
}

TEST(Controller, EagerInstructionsFailuresAndLiveWorkers) {
  auto controller = startController();
  ASSERT_TRUE(controller.ok()) << controller.status().message();
  Controller &c = **controller;
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  ASSERT_TRUE(c.declare(b.program()).isOk());

  // One instruction at a time, as the Python frontend sends them.
  auto sendNew = [&](int from) {
    std::vector<plan::Instruction> batch(b.program().instructions().begin() +
                                             from,
                                         b.program().instructions().end());
    ASSERT_TRUE(c.submit(batch).isOk());
  };
  auto waitFor = [&](auto accept) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto e = c.next(std::chrono::milliseconds(500));
      if (e && e->kind == ControllerEvent::Kind::ProcFailure)
        ADD_FAILURE() << e->message;
      if (e && accept(e->worker))
        return true;
    }
    return false;
  };
  int n = b.program().instructions_size();
  int64_t bad = b.op(0, "aten::mm", "", {val::ints({1})}); // wrong arg kind
  int64_t badFetch = b.fetch(0, bad);
  sendNew(n);
  int failures = 0, errors = 0;
  EXPECT_TRUE(waitFor([&](const plan::WorkerEvent &e) {
    failures += e.has_failure();
    errors += e.has_fetch() && e.fetch().instruction() == badFetch &&
              e.fetch().has_error();
    return failures == kRanks && errors == kRanks;
  }));
  // The workers live on: independent work after the failure succeeds.
  n = b.program().instructions_size();
  int64_t x = makeX(b);
  int64_t sum = b.reduce(0, x, meta(plan::FLOAT32, {2, 3}), {}, plan::SUM);
  int64_t good = b.fetch(0, sum);
  sendNew(n);
  int values = 0;
  EXPECT_TRUE(waitFor([&](const plan::WorkerEvent &e) {
    if (e.has_fetch() && e.fetch().instruction() == good) {
      EXPECT_TRUE(e.fetch().has_value()) << e.fetch().error().message();
      if (e.fetch().has_value())
        EXPECT_TRUE(
            at::equal(toTensor(e.fetch().value()), X(0) + X(1) + X(2) + X(3)));
      ++values;
    }
    return values == kRanks;
  }));
  EXPECT_TRUE(c.stop().isOk());
}

TEST(Controller, AWorkerKilledMidProgramIsReportedNotHungOn) {
  auto controller = startController();
  ASSERT_TRUE(controller.ok()) << controller.status().message();
  Controller &c = **controller;
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t x = makeX(b);
  int64_t first = b.fetch(0, x);
  // Every rank then waits in an all-reduce that rank 2 never joins.
  b.reduce(0, x, meta(plan::FLOAT32, {2, 3}), {}, plan::SUM);
  ASSERT_TRUE(c.declare(b.program()).isOk());
  std::vector<plan::Instruction> all(b.program().instructions().begin(),
                                     b.program().instructions().end());
  // Rank 2 is killed once rank 0 has fetched, i.e. mid-program.
  bool killed = false, reported = false;
  std::vector<int> pids = c.pids();
  ASSERT_EQ(pids.size(), size_t(kRanks));
  ASSERT_TRUE(c.submit(all).isOk());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int supervised = 0;
  while (!reported && std::chrono::steady_clock::now() < deadline) {
    auto e = c.next(std::chrono::milliseconds(500));
    if (!e)
      continue;
    if (e->worker.has_failure() && e->worker.failure().supervision())
      ++supervised; // a live member may notice before the controller says
    if (e->kind == ControllerEvent::Kind::ProcFailure) {
      EXPECT_TRUE(killed);
      EXPECT_EQ(e->rank, 2);
      EXPECT_NE(e->message.find("signal 9"), std::string::npos) << e->message;
      reported = true;
    } else if (!killed && e->worker.has_fetch() &&
               e->worker.fetch().instruction() == first) {
      ::kill(pids[2], SIGKILL);
      killed = true;
    }
  }
  EXPECT_TRUE(reported) << "no supervision event for the killed worker";
  // The live workers were waiting for rank 2 in the all-reduce: told of its
  // death, they fail it at once with a supervision error naming it instead
  // of waiting out the 20 s timeout.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (supervised < 3 && std::chrono::steady_clock::now() < until)
    if (auto e = c.next(std::chrono::milliseconds(200));
        e && e->worker.has_failure() && e->worker.failure().supervision()) {
      EXPECT_EQ(e->worker.failure().failed_rank(), 2);
      ++supervised;
    }
  EXPECT_EQ(supervised, 3);
  // Sending more to the mesh is no error: the live workers are served (the
  // fetches a dead rank owes fail; TensorSupervisionTest).
  EXPECT_TRUE(c.submit(plan::InstructionBatch()).isOk());
  auto stopStart = std::chrono::steady_clock::now();
  (void)c.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stopStart,
            std::chrono::seconds(15));
}

} // namespace
