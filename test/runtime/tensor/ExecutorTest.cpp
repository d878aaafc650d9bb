//===- ExecutorTest.cpp - The executor in one process ---------------------===//
//
// ATen calls by schema, errors and dependent errors, streams and the borrow
// state machine, recordings, memory cap, registered functions and actor
// calls. Expected values come from the same computation in local libtorch.
//
//===----------------------------------------------------------------------===//

#include "ExecutorHarness.h"

#include "monarch/tensor/Executor.h"
#include "monarch/tensor/Functions.h"
#include "monarch/tensor/Plan.h"
#include "monarch/tensor/PlanBuilder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

using namespace monarch::tensor;
using namespace monarch::tensor::testing;
namespace plan = monarch::plan;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

TEST(Executor, AtenOpsBySchemaWithScalarsListsAndOptionals) {
  PlanBuilder b({{"x", 1}});
  int64_t a = b.op(0, "aten::arange", "start", {val::i(0), val::i(6)}, 1, 0,
                   {{"dtype", val::dtype(plan::FLOAT32)}});
  int64_t m = b.op(0, "aten::reshape", "", {val::ref(a), val::ints({2, 3})});
  int64_t s = b.op(0, "aten::add", "Tensor", {val::ref(m), val::ref(m)}, 1, 0,
                   {{"alpha", val::scalarInt(2)}});
  int64_t sum = b.op(0, "aten::sum", "dim_IntList",
                     {val::ref(s), val::ints({1}), val::b(true)}, 1, 0,
                     {{"dtype", val::none()}});
  int64_t t = b.op(0, "aten::t", "", {val::ref(m)});
  int64_t mm = b.op(0, "aten::matmul", "", {val::ref(m), val::ref(t)});
  int64_t idx =
      b.op(0, "aten::index", "Tensor",
           {val::ref(m),
            val::list({val::none(),
                       constant(at::tensor({int64_t(2), int64_t(0)}))})});
  int64_t cat = b.op(0, "aten::cat", "", {val::refs({m, m}), val::i(0)});
  int64_t split = b.op(0, "aten::split", "Tensor", {val::ref(m), val::i(1)}, 2);
  int64_t full = b.op(
      0, "aten::full", "", {val::ints({2}), val::scalar(7.5)}, 1, 0,
      {{"dtype", val::dtype(plan::FLOAT64)}, {"device", val::device("cpu")}});
  std::map<std::string, int64_t> f;
  for (auto [name, ref] :
       std::vector<std::pair<std::string, int64_t>>{{"s", s},
                                                    {"sum", sum},
                                                    {"mm", mm},
                                                    {"idx", idx},
                                                    {"cat", cat},
                                                    {"split0", split},
                                                    {"split1", split + 1},
                                                    {"full", full}})
    f[name] = b.fetch(0, ref);
  Harness h;
  h.run(b);
  EXPECT_TRUE(h.failures.empty()) << h.failures.front().message();

  at::Tensor M = at::arange(6, at::kFloat).reshape({2, 3});
  EXPECT_TRUE(at::equal(h.value(f["s"]), M * 3));
  EXPECT_TRUE(at::equal(h.value(f["sum"]), (M * 3).sum({1}, true)));
  EXPECT_TRUE(at::allclose(h.value(f["mm"]), at::matmul(M, M.t())));
  EXPECT_TRUE(at::equal(
      h.value(f["idx"]),
      M.index({at::indexing::Slice(), at::tensor({int64_t(2), int64_t(0)})})));
  EXPECT_TRUE(at::equal(h.value(f["cat"]), at::cat({M, M}, 0)));
  EXPECT_TRUE(at::equal(h.value(f["split0"]), M.split(1)[0]));
  EXPECT_TRUE(at::equal(h.value(f["split1"]), M.split(1)[1]));
  at::Tensor F = h.value(f["full"]);
  EXPECT_EQ(F.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::equal(F, at::full({2}, 7.5, at::kDouble)));
}

TEST(Executor, OutVariantInPlaceOpsAndScalarResults) {
  PlanBuilder b({{"x", 1}});
  int64_t m = b.op(0, "aten::ones", "", {val::ints({2, 3})});
  int64_t o = b.op(0, "aten::zeros", "", {val::ints({2, 3})});
  int64_t r = b.op(0, "aten::add", "out", {val::ref(m), val::ref(m)}, 1, 0,
                   {{"out", val::ref(o)}});
  b.op(0, "aten::mul_", "Scalar", {val::ref(m), val::scalar(5)}, 0);
  int64_t total = b.op(0, "aten::sum", "", {val::ref(r)});
  int64_t item = b.op(0, "aten::item", "", {val::ref(total)}, 1);
  int64_t fo = b.fetch(0, o), fr = b.fetch(0, r), fm = b.fetch(0, m),
          fi = b.fetch(0, item);
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.failures.front().message();
  EXPECT_TRUE(at::equal(h.value(fo), at::full({2, 3}, 2.f)));
  EXPECT_TRUE(at::equal(h.value(fr), at::full({2, 3}, 2.f)));
  EXPECT_TRUE(at::equal(h.value(fm), at::full({2, 3}, 5.f)));
  EXPECT_EQ(h.value(fi).item<double>(), 12.0);
}

TEST(Executor, FailureIsReportedOnceAndDependentsPointAtTheRoot) {
  PlanBuilder b({{"x", 1}});
  int64_t a = b.op(0, "aten::ones", "", {val::ints({2, 3})});
  int64_t c = b.op(0, "aten::ones", "", {val::ints({4, 5})});
  int64_t bad = b.op(0, "aten::mm", "", {val::ref(a), val::ref(c)});
  int64_t badId = Harness::last(b);
  b.program().mutable_instructions(badId - 1)->set_location("train.py:12");
  int64_t dep = b.op(0, "aten::neg", "", {val::ref(bad)});
  int64_t dep2 = b.op(0, "aten::add", "Tensor", {val::ref(dep), val::ref(a)});
  int64_t ok = b.op(0, "aten::neg", "", {val::ref(a)});
  int64_t fd = b.fetch(0, dep2), fo = b.fetch(0, ok);
  Harness h;
  h.run(b);
  ASSERT_EQ(h.failures.size(), 1u);
  const auto &f = h.failures.front();
  EXPECT_EQ(f.instruction(), badId);
  EXPECT_EQ(f.rank(), 0);
  EXPECT_EQ(f.location(), "train.py:12");
  EXPECT_NE(f.message().find("cannot be multiplied"), std::string::npos)
      << f.message();
  EXPECT_EQ(f.message().find("frame #"), std::string::npos); // no backtrace
  plan::Failure e = h.error(fd);
  EXPECT_EQ(e.instruction(), badId);
  EXPECT_EQ(e.location(), "train.py:12");
  EXPECT_TRUE(at::equal(h.value(fo), -at::ones({2, 3})));
}

TEST(Executor, FailureMessagesCarryNoBacktrace) {
  // c10 errors thrown while running the op, while converting its constant
  // arguments at submit time, and while fetching: messages come without the
  // C++ backtrace ("Exception raised from ... frame #0: ...").
  PlanBuilder b({{"x", 1}});
  int64_t a = b.op(0, "aten::ones", "", {val::ints({2, 3})});
  int64_t bad = b.op(0, "aten::mm", "", {val::ref(a), val::ref(a)});
  int64_t badId = Harness::last(b);
  b.op(0, "aten::ones", "", {val::ints({2})}, 1, 0,
       {{"device", val::device("no_such_device:0")}});
  int64_t deviceId = Harness::last(b);
  int64_t fb = b.fetch(0, bad);
  Harness h;
  h.run(b);
  ASSERT_EQ(h.failures.size(), 2u);
  auto noBacktrace = [](const std::string &m) {
    EXPECT_EQ(m.find("Exception raised from"), std::string::npos) << m;
    EXPECT_EQ(m.find("frame #"), std::string::npos) << m;
    EXPECT_EQ(m.find("most recent call first"), std::string::npos) << m;
  };
  ASSERT_EQ(h.failuresFor(badId).size(), 1u);
  EXPECT_NE(h.failuresFor(badId)[0].message().find("cannot be multiplied"),
            std::string::npos);
  noBacktrace(h.failuresFor(badId)[0].message());
  ASSERT_EQ(h.failuresFor(deviceId).size(), 1u);
  EXPECT_NE(h.failuresFor(deviceId)[0].message().find("argument 'device'"),
            std::string::npos)
      << h.failuresFor(deviceId)[0].message();
  noBacktrace(h.failuresFor(deviceId)[0].message());
  noBacktrace(h.error(fb).message());
}

TEST(Executor, UndefinedTensorResultsKeepTheirPlace) {
  // native_layer_norm_backward with output_mask [false, true, true] returns
  // an undefined grad_input: results 1 and 2 still bind grad_weight and
  // grad_bias; result 0 is an unreported error that fails only its uses.
  PlanBuilder b({{"x", 1}});
  at::Tensor x = at::arange(8, at::kFloat).reshape({2, 4});
  at::Tensor w = at::full({4}, 1.5f), bias = at::full({4}, 0.5f);
  at::Tensor go = at::arange(8, at::kFloat).reshape({2, 4}) / 8;
  int64_t rx = b.op(0, "aten::clone", "", {constant(x)});
  int64_t rw = b.op(0, "aten::clone", "", {constant(w)});
  int64_t rb = b.op(0, "aten::clone", "", {constant(bias)});
  int64_t rgo = b.op(0, "aten::clone", "", {constant(go)});
  int64_t fwd = b.op(
      0, "aten::native_layer_norm", "",
      {val::ref(rx), val::ints({4}), val::ref(rw), val::ref(rb), val::f(1e-5)},
      3);
  int64_t mean = fwd + 1, rstd = fwd + 2;
  int64_t gi = b.op(0, "aten::native_layer_norm_backward", "",
                    {val::ref(rgo), val::ref(rx), val::ints({4}),
                     val::ref(mean), val::ref(rstd), val::ref(rw), val::ref(rb),
                     val::list({val::b(false), val::b(true), val::b(true)})},
                    3);
  int64_t bwdId = Harness::last(b);
  int64_t gw = gi + 1, gb = gi + 2;
  int64_t dep = b.op(0, "aten::neg", "", {val::ref(gi)});
  int64_t fgi = b.fetch(0, gi), fgw = b.fetch(0, gw), fgb = b.fetch(0, gb),
          fdep = b.fetch(0, dep);
  Harness h;
  h.run(b);
  EXPECT_TRUE(h.failures.empty()) << h.failures.front().message();
  auto ln = at::native_layer_norm(x, {4}, w, bias, 1e-5);
  auto want = at::native_layer_norm_backward(go, x, {4}, std::get<1>(ln),
                                             std::get<2>(ln), w, bias,
                                             {false, true, true});
  EXPECT_TRUE(at::allclose(h.value(fgw), std::get<1>(want)));
  EXPECT_TRUE(at::allclose(h.value(fgb), std::get<2>(want)));
  plan::Failure undefined = h.error(fgi);
  EXPECT_EQ(undefined.instruction(), bwdId);
  EXPECT_NE(undefined.message().find("aten::native_layer_norm_backward "
                                     "returned no tensor for result 0"),
            std::string::npos)
      << undefined.message();
  plan::Failure dependent = h.error(fdep);
  EXPECT_EQ(dependent.instruction(), bwdId);
  EXPECT_EQ(dependent.message(), undefined.message());
}

TEST(Executor, FailedInPlaceOpMarksTheMutatedTensor) {
  PlanBuilder b({{"x", 1}});
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2, 3})});
  int64_t y = b.op(0, "aten::ones", "", {val::ints({4})});
  b.op(0, "aten::add_", "Tensor", {val::ref(x), val::ref(y)}, 0);
  int64_t failing = Harness::last(b);
  int64_t fx = b.fetch(0, x), fy = b.fetch(0, y);
  Harness h;
  h.run(b);
  ASSERT_EQ(h.failuresFor(failing).size(), 1u);
  EXPECT_EQ(h.error(fx).instruction(), failing);
  EXPECT_TRUE(at::equal(h.value(fy), at::ones({4}))); // only read
}

TEST(Executor, BadCallsFailTheirInstructionOnly) {
  PlanBuilder b({{"x", 1}});
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  int64_t r1 = b.op(0, "aten::no_such_op", "", {val::ref(x)});
  int64_t i1 = Harness::last(b);
  b.op(0, "aten::neg", "", {val::ref(x), val::ref(x)});
  int64_t i2 = Harness::last(b);
  b.op(0, "aten::neg", "", {val::ref(x)}, 1, 0, {{"bogus", val::i(1)}});
  int64_t i3 = Harness::last(b);
  b.op(0, "aten::add", "Tensor", {val::ref(x)});
  int64_t i4 = Harness::last(b);
  b.op(0, "aten::sum", "dim_IntList", {val::ref(x), val::s("zero")});
  int64_t i5 = Harness::last(b);
  int64_t fr = b.fetch(0, r1);
  int64_t good = b.op(0, "aten::neg", "", {val::ref(x)});
  int64_t fg = b.fetch(0, good);
  Harness h;
  h.run(b);
  auto msg = [&](int64_t id) {
    auto f = h.failuresFor(id);
    return f.size() == 1 ? f[0].message() : std::string("<none>");
  };
  EXPECT_NE(msg(i1).find("unknown operator aten::no_such_op"),
            std::string::npos);
  EXPECT_NE(msg(i2).find("takes 1 arguments but 2 were given"),
            std::string::npos);
  EXPECT_NE(msg(i3).find("no argument 'bogus'"), std::string::npos);
  EXPECT_NE(msg(i4).find("missing argument 'other'"), std::string::npos);
  EXPECT_NE(msg(i5).find("argument 'dim'"), std::string::npos) << msg(i5);
  EXPECT_EQ(h.error(fr).instruction(), i1);
  EXPECT_TRUE(at::equal(h.value(fg), -at::ones({2})));
  EXPECT_EQ(h.failures.size(), 5u);
}

TEST(Executor, CudaDeviceMapsToCpuWithoutAGpu) {
  PlanBuilder b({{"x", 1}});
  int64_t x = b.op(0, "aten::ones", "", {val::ints({3})}, 1, 0,
                   {{"device", val::device("cuda:0")}});
  int64_t y = b.op(0, "aten::full", "", {val::ints({2}), val::scalar(2)}, 1, 0,
                   {{"device", val::device("cuda")}});
  int64_t fx = b.fetch(0, x), fy = b.fetch(0, y);
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.failures.front().message();
  EXPECT_TRUE(at::equal(h.value(fx), at::ones({3})));
  EXPECT_TRUE(at::equal(h.value(fy), at::full({2}, 2.f)));
}

TEST(Executor, MemoryCapFailsOnlyTheAllocationPastIt) {
  ExecutorOptions o;
  o.memoryCapBytes = 1 << 20; // 1 MiB
  // A program probing sizes: 2^k floats for k = 10..20.
  PlanBuilder b({{"x", 1}});
  std::map<int, int64_t> fetchOf, instOf;
  for (int k = 10; k <= 20; ++k) {
    int64_t t = b.op(0, "aten::zeros", "", {val::ints({int64_t(1) << k})});
    instOf[k] = Harness::last(b);
    fetchOf[k] = b.fetch(0, t);
    b.deleteRefs(0, {t});
  }
  Harness h(o);
  h.run(b);
  for (int k = 10; k <= 20; ++k) {
    bool fits = (int64_t(4) << k) <= (1 << 20) - (64 << 10); // leave slack
    bool over = (int64_t(4) << k) > (1 << 20);
    auto failures = h.failuresFor(instOf[k]);
    if (fits) {
      EXPECT_TRUE(failures.empty()) << "2^" << k << " floats";
      EXPECT_EQ(h.value(fetchOf[k]).numel(), int64_t(1) << k);
    }
    if (over) {
      ASSERT_EQ(failures.size(), 1u) << "2^" << k << " floats";
      EXPECT_NE(failures[0].message().find("memory cap exceeded"),
                std::string::npos);
    }
  }
}

TEST(Executor, RankCoordinatesAndMeshMembership) {
  ExecutorOptions o;
  o.rootShape = {{"host", 2}, {"gpu", 2}};
  o.rank = 2; // host=1, gpu=0
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t host0 = b.mesh(b.rootView().slice("host", 0).value());
  int64_t g = b.rank(0, {"gpu"}), hr = b.rank(0, {"host"});
  int64_t hg = b.rank(0, {"host", "gpu"}), gh = b.rank(0, {"gpu", "host"});
  int64_t fg = b.fetch(0, g), fh = b.fetch(0, hr), fhg = b.fetch(0, hg),
          fgh = b.fetch(0, gh);
  int64_t other = b.op(host0, "aten::ones", "", {val::ints({1})});
  int64_t fother = b.fetch(host0, other);
  Harness h(o);
  h.run(b);
  EXPECT_TRUE(h.failures.empty());
  EXPECT_EQ(h.value(fg).item<int64_t>(), 0);
  EXPECT_EQ(h.value(fh).item<int64_t>(), 1);
  EXPECT_EQ(h.value(fhg).item<int64_t>(), 2);
  EXPECT_EQ(h.value(fgh).item<int64_t>(), 1);
  EXPECT_EQ(h.value(fg).scalar_type(), at::kLong);
  EXPECT_EQ(h.fetches.count(fother), 0u); // rank 2 is not in host=0
}

// --- streams and borrows -----------------------------------------------------

std::mutex flagMutex;
std::condition_variable flagCv;
bool flag = false;

RegisterFunction waitFlag("test.wait_flag", [](const auto &) {
  std::unique_lock<std::mutex> lock(flagMutex);
  if (!flagCv.wait_for(lock, seconds(5), [] { return flag; }))
    throw std::runtime_error(
        "flag never set: streams did not run concurrently");
  return std::vector<at::Tensor>{at::ones({1})};
});
RegisterFunction setFlag("test.set_flag", [](const auto &) {
  {
    std::lock_guard<std::mutex> lock(flagMutex);
    flag = true;
  }
  flagCv.notify_all();
  return std::vector<at::Tensor>{};
});
RegisterFunction
    slowFill("test.slow_fill", [](const std::vector<c10::IValue> &a) {
      std::this_thread::sleep_for(milliseconds(50)); // widen the race window
      a.at(0).toTensor().fill_(a.at(1).toDouble());
      return std::vector<at::Tensor>{};
    });

TEST(Streams, DifferentStreamsRunConcurrently) {
  PlanBuilder b({{"x", 1}});
  int64_t s1 = b.stream("side");
  int64_t r = b.ref();
  callFn(b, s1, "test.wait_flag", {}, {r}); // blocks stream "side"
  callFn(b, 0, "test.set_flag");            // queued later, other stream
  int64_t fr = b.fetch(0, r, s1);
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.failures.front().message();
  EXPECT_TRUE(at::equal(h.value(fr), at::ones({1})));
}

TEST(Streams, UsingATensorOnAnotherStreamIsWrongStream) {
  PlanBuilder b({{"x", 1}});
  int64_t s1 = b.stream("side");
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  int64_t y = b.op(0, "aten::neg", "", {val::ref(x)}, 1, s1);
  int64_t bad = Harness::last(b);
  int64_t fy = b.fetch(0, y, s1);
  Harness h;
  h.run(b);
  auto f = h.failuresFor(bad);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message().find("WRONG_STREAM: ref " + std::to_string(x) +
                                " belongs to stream 'default' but is used on "
                                "stream 'side'"),
            std::string::npos)
      << f[0].message();
  EXPECT_EQ(h.error(fy).instruction(), bad);
}

TEST(Borrows, ReadOnlyBorrowStateMachine) {
  PlanBuilder b({{"x", 1}});
  int64_t s1 = b.stream("comm");
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  auto br = borrow(b, 1, x, 0, s1, false);
  {
    auto &fu = b.add(0, s1);
    fu.mutable_borrow_first_use()->set_borrow(1);
  }
  int64_t y =
      b.op(0, "aten::mul", "Scalar", {val::ref(br.result), val::scalar(3)}, 1,
           s1); // read on the receiver: fine
  int64_t fy = b.fetch(0, y, s1);
  int64_t z = b.op(0, "aten::neg", "", {val::ref(x)}); // origin reads: fine
  int64_t fz = b.fetch(0, z);
  b.op(0, "aten::add_", "Scalar", {val::ref(br.result), val::scalar(1)}, 0, s1);
  int64_t mutBorrowed = Harness::last(b);
  b.op(0, "aten::add_", "Scalar", {val::ref(x), val::scalar(1)}, 0, 0);
  int64_t mutOrigin = Harness::last(b);
  {
    auto &lu = b.add(0, s1);
    lu.mutable_borrow_last_use()->set_borrow(1);
  }
  int64_t dropId = drop(b, 1, 0);
  b.op(0, "aten::neg", "", {val::ref(br.result)}, 1, s1);
  int64_t afterDrop = Harness::last(b);
  b.op(0, "aten::add_", "Scalar", {val::ref(x), val::scalar(10)}, 0, 0);
  int64_t fx = b.fetch(0, x);
  Harness h;
  h.run(b);
  EXPECT_TRUE(at::equal(h.value(fy), at::full({2}, 3.f)));
  EXPECT_TRUE(at::equal(h.value(fz), -at::ones({2})));
  auto m1 = h.failuresFor(mutBorrowed), m2 = h.failuresFor(mutOrigin),
       m3 = h.failuresFor(afterDrop);
  ASSERT_EQ(m1.size(), 1u);
  EXPECT_NE(m1[0].message().find("read-only borrow"), std::string::npos);
  ASSERT_EQ(m2.size(), 1u);
  EXPECT_NE(m2[0].message().find("would be mutated while it is borrowed "
                                 "read-only"),
            std::string::npos);
  ASSERT_EQ(m3.size(), 1u);
  EXPECT_NE(m3[0].message().find("DROPPED: ref " + std::to_string(br.result) +
                                 " was borrow 1, dropped by instruction " +
                                 std::to_string(dropId) + " at model.py:40"),
            std::string::npos)
      << m3[0].message();
  // After the drop the origin may mutate again (and the failed add_ did not).
  EXPECT_TRUE(at::equal(h.value(fx), at::full({2}, 11.f)));
  EXPECT_EQ(h.failures.size(), 3u);
}

TEST(Borrows, MutableBorrowTakesAllAccessUntilDrop) {
  PlanBuilder b({{"x", 1}});
  int64_t s1 = b.stream("comm");
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  auto br = borrow(b, 7, x, 0, s1, true);
  b.op(0, "aten::mul_", "Scalar", {val::ref(br.result), val::scalar(4)}, 0, s1);
  b.op(0, "aten::neg", "", {val::ref(x)}); // origin while borrowed
  int64_t originUse = Harness::last(b);
  // A read-only borrow cannot then be borrowed mutably; nor can x twice.
  auto again = borrow(b, 8, x, 0, s1, true);
  int64_t againId = Harness::last(b);
  (void)again;
  drop(b, 7, 0);
  int64_t fx = b.fetch(0, x);
  auto ro = borrow(b, 9, x, 0, s1, false);
  (void)ro;
  auto mutOfRo = borrow(b, 10, x, 0, s1, true);
  int64_t mutOfRoId = Harness::last(b);
  (void)mutOfRo;
  Harness h;
  h.run(b);
  auto f1 = h.failuresFor(originUse), f2 = h.failuresFor(againId),
       f3 = h.failuresFor(mutOfRoId);
  ASSERT_EQ(f1.size(), 1u);
  EXPECT_NE(f1[0].message().find("BORROWED: ref " + std::to_string(x) +
                                 " is mutably borrowed by borrow 7"),
            std::string::npos)
      << f1[0].message();
  ASSERT_EQ(f2.size(), 1u);
  EXPECT_NE(f2[0].message().find("BORROWED"), std::string::npos);
  ASSERT_EQ(f3.size(), 1u);
  EXPECT_NE(
      f3[0].message().find("mutably: it is borrowed read-only (borrow 9)"),
      std::string::npos)
      << f3[0].message();
  // The receiver's in-place change is visible to the origin after the drop.
  EXPECT_TRUE(at::equal(h.value(fx), at::full({2}, 4.f)));
}

TEST(Borrows, FirstUseWaitsForTheOriginStream) {
  PlanBuilder b({{"x", 1}});
  int64_t s1 = b.stream("comm");
  int64_t x = b.op(0, "aten::zeros", "", {val::ints({2})});
  callFn(b, 0, "test.slow_fill", {val::ref(x), val::f(7)});
  auto br = borrow(b, 1, x, 0, s1, false);
  int64_t fb = b.fetch(0, br.result, s1); // implicit first use
  drop(b, 1, 0);
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.failures.front().message();
  EXPECT_TRUE(at::equal(h.value(fb), at::full({2}, 7.f)));
}

TEST(Borrows, StepsOnUnknownOrDroppedBorrowsFail) {
  PlanBuilder b({{"x", 1}});
  int64_t s1 = b.stream("comm");
  int64_t x = b.op(0, "aten::zeros", "", {val::ints({2})});
  int64_t unknown = drop(b, 99, 0);
  borrow(b, 1, x, 0, s1, false);
  drop(b, 1, 0);
  int64_t twice = drop(b, 1, 0);
  auto same = borrow(b, 2, x, 0, 0, false);
  (void)same;
  int64_t sameId = Harness::last(b);
  Harness h;
  h.run(b);
  ASSERT_EQ(h.failuresFor(unknown).size(), 1u);
  EXPECT_NE(h.failuresFor(unknown)[0].message().find("unknown borrow 99"),
            std::string::npos);
  ASSERT_EQ(h.failuresFor(twice).size(), 1u);
  EXPECT_NE(h.failuresFor(twice)[0].message().find("already dropped"),
            std::string::npos);
  ASSERT_EQ(h.failuresFor(sameId).size(), 1u);
  EXPECT_EQ(h.failures.size(), 3u);
}

// --- recordings, fetch/status, delete, functions, actors --------------------

/// Appends an ATen call to a recording's body.
void addBodyOp(plan::Recording &rec, int64_t id, int64_t stream,
               const std::string &name, const std::string &overload,
               const std::vector<plan::Value> &args,
               const std::vector<int64_t> &results) {
  auto *inst = rec.add_body();
  inst->set_id(id);
  inst->set_stream(stream);
  auto *op = inst->mutable_call_op();
  op->set_name(name);
  op->set_overload(overload);
  for (const plan::Value &arg : args)
    *op->add_args() = arg;
  for (int64_t r : results)
    op->add_results(r);
}

/// Appends a call of recording `id` on `actuals`; returns its one result.
int64_t callRecording(PlanBuilder &b, int64_t id,
                      const std::vector<int64_t> &actuals) {
  auto *call = b.add(0).mutable_call_recording();
  call->set_recording(id);
  for (int64_t a : actuals)
    call->add_actuals(a);
  int64_t result = b.ref();
  call->add_results(result);
  return result;
}

TEST(Recordings, BorrowIdsAreLocalToEachCall) {
  // rec(t): borrow t mutably onto "comm", double it there, drop, then clone
  // it on the default stream -- a DDP loop body's shape. Called twice with
  // the same borrow id in its body.
  PlanBuilder b({{"x", 1}});
  int64_t comm = b.stream("comm");
  {
    auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
    rec->set_id(1);
    rec->add_formals(1000);
    rec->add_results(1002);
    auto *create = rec->add_body();
    create->set_id(600);
    create->set_stream(comm);
    auto *bc = create->mutable_borrow_create();
    bc->set_borrow(1);
    bc->set_input(1000);
    bc->set_from_stream(0);
    bc->set_mutable_(true);
    bc->set_result(1001);
    addBodyOp(*rec, 601, comm, "aten::mul_", "Scalar",
              {val::ref(1001), val::scalar(2)}, {});
    auto *dropInst = rec->add_body();
    dropInst->set_id(602);
    dropInst->mutable_borrow_drop()->set_borrow(1);
    addBodyOp(*rec, 603, 0, "aten::clone", "", {val::ref(1000)}, {1002});
  }
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  int64_t r1 = callRecording(b, 1, {x}), r2 = callRecording(b, 1, {x});
  int64_t f1 = b.fetch(0, r1), f2 = b.fetch(0, r2);
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.failures.front().message();
  EXPECT_TRUE(at::equal(h.value(f1), at::full({2}, 2.f)));
  EXPECT_TRUE(at::equal(h.value(f2), at::full({2}, 4.f)));
}

TEST(Recordings, DefinedOnceCalledWithDifferentActuals) {
  PlanBuilder b({{"x", 1}});
  // rec(a, b) = a * b + a
  {
    auto &def = b.add(0);
    auto *rec = def.mutable_define_recording()->mutable_recording();
    rec->set_id(1);
    rec->add_formals(1000);
    rec->add_formals(1001);
    rec->add_results(1003);
    addBodyOp(*rec, 500, 0, "aten::mul", "Tensor",
              {val::ref(1000), val::ref(1001)}, {1002});
    addBodyOp(*rec, 501, 0, "aten::add", "Tensor",
              {val::ref(1002), val::ref(1000)}, {1003});
  }
  at::Tensor X = at::arange(4, at::kFloat), Y = at::full({4}, 3.f);
  int64_t x = b.op(0, "aten::clone", "", {constant(X)});
  int64_t y = b.op(0, "aten::clone", "", {constant(Y)});
  int64_t r1 = callRecording(b, 1, {x, y}), r2 = callRecording(b, 1, {y, x});
  int64_t f1 = b.fetch(0, r1), f2 = b.fetch(0, r2);
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.failures.front().message();
  EXPECT_TRUE(at::equal(h.value(f1), X * Y + X));
  EXPECT_TRUE(at::equal(h.value(f2), Y * X + Y));
  // x, y and the two results; the body's temporary was freed after each call.
  EXPECT_EQ(h.executor->liveRefs(), 4u);
}

TEST(Executor, StatusRepliesAfterEarlierWorkAndDeleteFrees) {
  PlanBuilder b({{"x", 1}});
  int64_t s1 = b.stream("side");
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  int64_t y = b.op(0, "aten::ones", "", {val::ints({2})}, 1, s1);
  b.fetch(0, x);
  b.fetch(0, y, s1);
  int64_t st = b.status(0);
  b.deleteRefs(0, {x});
  b.deleteRefs(0, {y}, s1);
  Harness h;
  h.run(b);
  ASSERT_EQ(h.statuses, std::vector<int64_t>{st});
  EXPECT_EQ(h.fetchOrderAtStatus, 2u);
  EXPECT_EQ(h.executor->liveRefs(), 0u);
  // Eager use of a deleted ref fails cleanly.
  PlanBuilder c({{"x", 1}});
  c.op(0, "aten::neg", "", {val::ref(x)});
  h.run(c, /*validate=*/false);
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_NE(h.failures[0].message().find("is not defined"), std::string::npos);
}

TEST(Executor, ReduceDimErrorsAndMissingBackendFailCleanly) {
  ExecutorOptions o;
  o.rootShape = {{"host", 2}, {"gpu", 2}};
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  auto m = meta(plan::FLOAT32, {2});
  b.reduce(0, x, m, {"tp"}, plan::SUM);
  int64_t unknown = Harness::last(b);
  b.reduce(0, x, m, {"gpu", "gpu"}, plan::SUM);
  int64_t repeated = Harness::last(b);
  int64_t r = b.reduce(0, x, m, {"gpu"}, plan::SUM);
  int64_t noBackend = Harness::last(b);
  int64_t fr = b.fetch(0, r);
  Harness h(o);
  h.run(b, /*validate=*/false); // the loader would refuse the first two
  ASSERT_EQ(h.failuresFor(unknown).size(), 1u);
  EXPECT_NE(h.failuresFor(unknown)[0].message().find("tp"), std::string::npos);
  ASSERT_EQ(h.failuresFor(repeated).size(), 1u);
  ASSERT_EQ(h.failuresFor(noBackend).size(), 1u);
  EXPECT_NE(h.failuresFor(noBackend)[0].message().find("no collective backend"),
            std::string::npos);
  EXPECT_EQ(h.error(fr).instruction(), noBackend);
}

RegisterFunction twice("test.twice", [](const std::vector<c10::IValue> &a) {
  return std::vector<at::Tensor>{a.at(0).toTensor() * a.at(1).toInt()};
});

class Doubler : public ActorBridge {
public:
  std::vector<at::Tensor> call(const plan::CallActor &call,
                               const std::vector<c10::IValue> &args) override {
    calls.push_back(call.actor() + "." + call.endpoint());
    return {args.at(0).toTensor() * 2};
  }
  std::vector<std::string> calls;
};

TEST(Executor, RegisteredFunctionsAndActorEndpoints) {
  PlanBuilder b({{"x", 1}});
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  int64_t r = b.ref();
  callFn(b, 0, "test.twice", {val::ref(x), val::i(5)}, {r});
  int64_t missing = b.ref();
  int64_t missingId = callFn(b, 0, "test.nope", {}, {missing}).id();
  int64_t a = b.ref();
  {
    auto *c = b.add(0).mutable_call_actor();
    c->set_actor("trainer");
    c->set_endpoint("step");
    *c->add_args() = val::ref(x);
    c->add_results(a);
  }
  int64_t fr = b.fetch(0, r), fa = b.fetch(0, a), fm = b.fetch(0, missing);
  auto bridge = std::make_shared<Doubler>();
  ExecutorOptions o;
  o.actors = bridge;
  Harness h(o);
  h.run(b);
  EXPECT_TRUE(at::equal(h.value(fr), at::full({2}, 5.f)));
  EXPECT_TRUE(at::equal(h.value(fa), at::full({2}, 2.f)));
  EXPECT_EQ(bridge->calls, std::vector<std::string>{"trainer.step"});
  EXPECT_EQ(h.error(fm).instruction(), missingId);
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_NE(h.failures[0].message().find("no function registered as "
                                         "'test.nope'"),
            std::string::npos);
  // Without a bridge, an actor call fails as an instruction.
  Harness none;
  none.run(b);
  EXPECT_EQ(none.failures.size(), 2u);
}

TEST(Executor, FunctionResolverMakesUnregisteredNamesOnFirstUse) {
  std::vector<std::pair<std::string, std::string>> asked;
  FunctionRegistry::global().setResolver(
      [&asked](const std::string &name,
               const std::string &definition) -> TensorFunction {
        asked.emplace_back(name, definition);
        if (name.rfind("resolved:", 0) != 0)
          return nullptr;
        // A by-value definition says what to add (the Python worker
        // unpickles a function from it).
        float add = definition.empty() ? 1.f : std::stof(definition);
        return [add](const std::vector<c10::IValue> &args) {
          return std::vector<at::Tensor>{args[0].toTensor() + add};
        };
      });
  PlanBuilder b({{"x", 1}});
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  int64_t r1 = b.ref(), r2 = b.ref(), r3 = b.ref(), r4 = b.ref(), r5 = b.ref();
  callFn(b, 0, "resolved:plus1", {val::ref(x)}, {r1});
  callFn(b, 0, "resolved:plus1", {val::ref(r1)}, {r2});
  int64_t unknownId = callFn(b, 0, "unresolved", {val::ref(x)}, {r3}).id();
  callFn(b, 0, "resolved:@by-value", {val::ref(x)}, {r4})
      .mutable_call_function()
      ->set_definition("10");
  // Later calls of a by-value name may carry the definition again: the
  // function made the first time is kept.
  callFn(b, 0, "resolved:@by-value", {val::ref(r4)}, {r5})
      .mutable_call_function()
      ->set_definition("10");
  int64_t f2 = b.fetch(0, r2), f3 = b.fetch(0, r3), f5 = b.fetch(0, r5);
  Harness h;
  h.run(b);
  FunctionRegistry::global().setResolver(nullptr);
  EXPECT_TRUE(at::equal(h.value(f2), at::full({2}, 3.f)));
  EXPECT_EQ(h.error(f3).instruction(), unknownId);
  EXPECT_TRUE(at::equal(h.value(f5), at::full({2}, 21.f)));
  // Asked once per name: a function it made is kept.
  using Asked = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(asked, (Asked{{"resolved:plus1", ""},
                          {"unresolved", ""},
                          {"resolved:@by-value", "10"}}));
}

} // namespace

namespace {

std::vector<plan::TraceEvent> eventsOf(const std::vector<plan::TraceEvent> &all,
                                       int64_t instruction) {
  std::vector<plan::TraceEvent> out;
  for (const auto &e : all)
    if (e.instruction() == instruction)
      out.push_back(e);
  return out;
}

} // namespace

TEST(Trace, OneEventPerInstructionOnTwoStreamsAndRecordingCalls) {
  PlanBuilder b({{"x", 1}});
  int64_t side = b.stream("side");
  // rec 7 (compiled once): a -> neg(a) * a.
  {
    auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
    rec->set_id(7);
    rec->add_formals(1000);
    rec->add_results(1002);
    addBodyOp(*rec, 700, 0, "aten::neg", "", {val::ref(1000)}, {1001});
    addBodyOp(*rec, 701, 0, "aten::mul", "Tensor",
              {val::ref(1001), val::ref(1000)}, {1002});
  }
  // rec 8 (a rank tensor in its body: expanded at each call): a -> a + rank.
  {
    auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
    rec->set_id(8);
    rec->add_formals(1100);
    rec->add_results(1102);
    auto *rank = rec->add_body();
    rank->set_id(800);
    rank->mutable_rank_tensor()->set_result(1101);
    addBodyOp(*rec, 801, 0, "aten::add", "Tensor",
              {val::ref(1100), val::ref(1101)}, {1102});
  }
  int64_t x = b.op(0, "aten::ones", "", {val::ints({4})});
  int64_t onesId = Harness::last(b);
  int64_t y = b.op(0, "aten::zeros", "", {val::ints({4})}, 1, side);
  int64_t zerosId = Harness::last(b);
  int64_t r1 = callRecording(b, 7, {x});
  int64_t r2 = callRecording(b, 7, {r1});
  int64_t r3 = callRecording(b, 8, {r2});
  int64_t r4 = callRecording(b, 8, {r3});
  b.deleteRefs(0, {r1});
  int64_t deleteId = Harness::last(b);
  int64_t f = b.fetch(0, r4);
  int64_t fy = b.fetch(0, y, side);
  Harness h({}, /*trace=*/true);
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.failures.front().message();
  EXPECT_TRUE(at::equal(h.value(f), at::full({4}, -1.f)));
  EXPECT_TRUE(at::equal(h.value(fy), at::zeros({4})));
  EXPECT_FALSE(h.concurrentTraces);

  std::lock_guard<std::mutex> lock(h.mutex);
  const auto &events = h.traces;
  auto one = [&](int64_t id, const std::string &name, int64_t stream) {
    auto e = eventsOf(events, id);
    ASSERT_EQ(e.size(), 1u) << "instruction " << id;
    EXPECT_EQ(e[0].name(), name);
    EXPECT_EQ(e[0].stream(), stream);
    EXPECT_EQ(e[0].recording(), 0);
  };
  one(onesId, "aten::ones", 0);
  one(zerosId, "aten::zeros", side);
  one(deleteId, "delete_refs", 0);
  one(f, "fetch", 0);
  one(fy, "fetch", side);
  // Body instructions: their own ids, once per call, the recording set.
  auto body = [&](int64_t id, const std::string &name, int64_t recording) {
    auto e = eventsOf(events, id);
    ASSERT_EQ(e.size(), 2u) << "instruction " << id;
    for (const auto &ev : e) {
      EXPECT_EQ(ev.name(), name);
      EXPECT_EQ(ev.recording(), recording);
      EXPECT_EQ(ev.stream(), 0);
    }
    EXPECT_LE(e[0].end_ns(), e[1].start_ns());
  };
  body(700, "aten::neg", 7);
  body(701, "aten::mul.Tensor", 7);
  body(800, "rank_tensor", 8);
  body(801, "aten::add.Tensor", 8);
  // 2 ops + 8 body instructions + delete + 2 fetches.
  EXPECT_EQ(events.size(), 13u);

  // Monotonic times; on one stream, events follow one another.
  std::map<int64_t, std::vector<plan::TraceEvent>> byStream;
  for (const auto &e : events) {
    EXPECT_GT(e.start_ns(), 0);
    EXPECT_LE(e.start_ns(), e.end_ns());
    EXPECT_FALSE(e.on_device()) << "a device-time event on CPU streams";
    byStream[e.stream()].push_back(e);
  }
  EXPECT_EQ(byStream[side].size(), 2u);
  for (auto &[stream, list] : byStream) {
    std::sort(list.begin(), list.end(), [](const auto &a, const auto &b) {
      return a.start_ns() < b.start_ns();
    });
    for (size_t k = 1; k < list.size(); ++k)
      EXPECT_LE(list[k - 1].end_ns(), list[k].start_ns())
          << "stream " << stream << ": instruction "
          << list[k - 1].instruction() << " overlaps " << list[k].instruction();
  }
}

TEST(Trace, CompiledRecordingErrorsMatchExpansion) {
  // The same failing body, compiled (rec 1) and expanded (rec 2: its rank
  // tensor keeps it from compiling): one root failure per call, with the
  // body's id and the call in its location; dependents point at it.
  PlanBuilder b({{"x", 1}});
  for (int64_t id : {1, 2}) {
    auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
    rec->set_id(id);
    rec->add_formals(1000);
    rec->add_results(1003);
    if (id == 2) {
      auto *rank = rec->add_body();
      rank->set_id(id * 100 + 9);
      rank->mutable_rank_tensor()->set_result(1009);
    }
    // mm of 1-d tensors fails; the add depends on it.
    addBodyOp(*rec, id * 100, 0, "aten::mm", "",
              {val::ref(1000), val::ref(1000)}, {1001});
    addBodyOp(*rec, id * 100 + 1, 0, "aten::neg", "", {val::ref(1000)}, {1002});
    addBodyOp(*rec, id * 100 + 2, 0, "aten::add", "Tensor",
              {val::ref(1001), val::ref(1002)}, {1003});
  }
  int64_t x = b.op(0, "aten::ones", "", {val::ints({3})});
  int64_t r1 = callRecording(b, 1, {x});
  int64_t call1 = Harness::last(b);
  int64_t r2 = callRecording(b, 2, {x});
  int64_t f1 = b.fetch(0, r1), f2 = b.fetch(0, r2);
  Harness h;
  h.run(b);
  for (int64_t id : {1, 2}) {
    auto f = h.failuresFor(id * 100);
    ASSERT_EQ(f.size(), 1u) << "recording " << id;
    EXPECT_NE(f[0].location().find("(recording " + std::to_string(id) +
                                   ", called by instruction"),
              std::string::npos)
        << f[0].location();
    EXPECT_TRUE(h.failuresFor(id * 100 + 2).empty());
  }
  EXPECT_NE(h.failuresFor(100)[0].location().find("called by instruction " +
                                                  std::to_string(call1)),
            std::string::npos);
  EXPECT_EQ(h.failures.size(), 2u);
  EXPECT_EQ(h.error(f1).instruction(), 100);
  EXPECT_EQ(h.error(f2).instruction(), 200);
  // Only x and the two (errored) results remain: locals were freed.
  EXPECT_EQ(h.executor->liveRefs(), 3u);
}

// --- outlined stretches (runtime/tensor/lib/OutlineStretches.h) -------------

/// Recording `id`(x) -> r: r = -(x * x + x) * 2 with a rank tensor between
/// the two runs of ATen calls (which keeps the body from compiling as one
/// task), its locals deleted as the frontend does; outlined when a
/// CUDA-graph candidate.
void defineSplitBody(PlanBuilder &b, int64_t id, bool candidate) {
  auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
  rec->set_id(id);
  rec->set_cuda_graph(candidate);
  rec->add_formals(1000);
  rec->add_results(1006);
  int64_t n = id * 100;
  addBodyOp(*rec, n, 0, "aten::mul", "Tensor", {val::ref(1000), val::ref(1000)},
            {1001});
  addBodyOp(*rec, n + 1, 0, "aten::add", "Tensor",
            {val::ref(1001), val::ref(1000)}, {1002});
  auto *del = rec->add_body();
  del->set_id(n + 2);
  del->mutable_delete_refs()->add_refs(1001);
  auto *rank = rec->add_body();
  rank->set_id(n + 3);
  rank->mutable_rank_tensor()->set_result(1003);
  addBodyOp(*rec, n + 4, 0, "aten::neg", "", {val::ref(1002)}, {1004});
  addBodyOp(*rec, n + 5, 0, "aten::mul", "Scalar",
            {val::ref(1004), val::scalar(2)}, {1006});
}

TEST(OutlinedStretches, ValuesAndFreedRefsMatchTheExpansion) {
  PlanBuilder b({{"x", 1}});
  defineSplitBody(b, 1, /*candidate=*/true);
  defineSplitBody(b, 2, /*candidate=*/false);
  at::Tensor X = at::arange(6, at::kFloat);
  int64_t x = b.op(0, "aten::clone", "", {constant(X)});
  std::vector<int64_t> fetches;
  for (int64_t id : {1, 2, 1, 2})
    fetches.push_back(b.fetch(0, callRecording(b, id, {x})));
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  for (int64_t f : fetches)
    EXPECT_TRUE(at::equal(h.value(f), -(X * X + X) * 2));
  // Recording 1's two runs were outlined, recording 2 (not a candidate) not.
  EXPECT_EQ(h.debugCount("recording 1: instructions 100..102 outlined"), 1u);
  EXPECT_EQ(h.debugCount("recording 1: instructions 104..105 outlined"), 1u);
  EXPECT_EQ(h.debugCount("recording 2"), 0u);
  // x and the four results: every stretch's and body's local was freed.
  EXPECT_EQ(h.executor->liveRefs(), 5u);
}

TEST(OutlinedStretches, ALoopOverAnOutlinedBodyCarriesItsValues) {
  PlanBuilder b({{"x", 1}});
  defineSplitBody(b, 1, /*candidate=*/true);
  at::Tensor X = at::full({3}, 0.5f);
  int64_t x = b.op(0, "aten::clone", "", {constant(X)});
  auto &inst = b.add(0);
  plan::Loop *loop = inst.mutable_loop();
  loop->set_recording(1);
  loop->set_trips(3);
  loop->add_carried(x);
  int64_t r = b.ref();
  loop->add_results(r);
  int64_t f = b.fetch(0, r);
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  at::Tensor want = X;
  for (int k = 0; k < 3; ++k)
    want = -(want * want + want) * 2;
  EXPECT_TRUE(at::allclose(h.value(f), want));
}

TEST(OutlinedStretches, ErrorsAndUsesOfDeletedRefsMatchTheExpansion) {
  // mm of 1-d tensors fails in the first stretch, its dependents in both
  // fail as dependents; a body reading a ref it deleted fails that use.
  PlanBuilder b({{"x", 1}});
  for (int64_t id : {1, 2}) {
    auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
    rec->set_id(id);
    rec->set_cuda_graph(id == 1);
    rec->add_formals(1000);
    rec->add_results(1005);
    int64_t n = id * 100;
    addBodyOp(*rec, n, 0, "aten::mm", "", {val::ref(1000), val::ref(1000)},
              {1001});
    addBodyOp(*rec, n + 1, 0, "aten::neg", "", {val::ref(1001)}, {1002});
    auto *rank = rec->add_body();
    rank->set_id(n + 2);
    rank->mutable_rank_tensor()->set_result(1003);
    addBodyOp(*rec, n + 3, 0, "aten::abs", "", {val::ref(1002)}, {1004});
    addBodyOp(*rec, n + 4, 0, "aten::exp", "", {val::ref(1004)}, {1006});
    auto *del = rec->add_body();
    del->set_id(n + 5);
    del->mutable_delete_refs()->add_refs(1004);
    addBodyOp(*rec, n + 6, 0, "aten::neg", "", {val::ref(1004)}, {1005});
  }
  int64_t x = b.op(0, "aten::ones", "", {val::ints({3})});
  int64_t f1 = b.fetch(0, callRecording(b, 1, {x}));
  int64_t f2 = b.fetch(0, callRecording(b, 2, {x}));
  Harness h;
  h.run(b, /*validate=*/false); // validation refuses the use of 1004
  EXPECT_EQ(h.debugCount("recording 1: instructions 100..101 outlined"), 1u);
  for (int64_t id : {1, 2}) {
    auto mm = h.failuresFor(id * 100);
    ASSERT_EQ(mm.size(), 1u) << h.allFailures();
    EXPECT_NE(mm[0].location().find("(recording " + std::to_string(id) +
                                    ", called by instruction"),
              std::string::npos)
        << mm[0].location();
    EXPECT_TRUE(h.failuresFor(id * 100 + 1).empty()); // a dependent
    EXPECT_EQ(h.failuresFor(id * 100 + 6).size(), 1u) << h.allFailures();
  }
  EXPECT_EQ(h.debugCount("recording 1: instructions 103..105 outlined"), 1u);
  // The same words (the refs' local numbers differ between the calls).
  auto words = [](std::string m) {
    m.erase(std::remove_if(m.begin(), m.end(),
                           [](char c) { return std::isdigit(c) || c == '-'; }),
            m.end());
    return m;
  };
  EXPECT_EQ(words(h.failuresFor(106)[0].message()),
            words(h.failuresFor(206)[0].message()));
  EXPECT_EQ(h.failures.size(), 4u) << h.allFailures();
  EXPECT_EQ(h.error(f1).instruction(), 106);
  EXPECT_EQ(h.error(f2).instruction(), 206);
}

TEST(OutlinedStretches, AStretchCallIsTheExecutorsOwnNeverAPlans) {
  PlanBuilder b({{"x", 1}});
  defineSplitBody(b, 1, /*candidate=*/true);
  int64_t x = b.op(0, "aten::ones", "", {val::ints({3})});
  auto *call = b.add(0).mutable_call_recording();
  call->set_recording(1);
  call->set_stretch(1);
  call->add_actuals(x);
  call->add_results(b.ref());
  int64_t bad = Harness::last(b);
  Status s = validatePlan(b.program());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("internal to the executor"), std::string::npos)
      << s.message();
  Harness h;
  h.run(b, /*validate=*/false);
  auto f = h.failuresFor(bad);
  ASSERT_EQ(f.size(), 1u) << h.allFailures();
  EXPECT_NE(f[0].message().find("internal to the executor"), std::string::npos);
}

TEST(OutlinedStretches, TensorConstantsCompileUnlessAnOpMayWriteOrReturnThem) {
  // `x * 0.5 + 1` as the frontend records it (0-d tensor constants) is
  // outlined; a stretch passing a constant as the self of an in-place op is
  // not (a compiled body would share the constant it writes between calls).
  // Two calls of each give the expansion's values.
  PlanBuilder b({{"x", 1}});
  auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
  rec->set_id(1);
  rec->set_cuda_graph(true);
  rec->add_formals(1000);
  rec->add_results(1005);
  addBodyOp(*rec, 100, 0, "aten::mul", "Tensor",
            {val::ref(1000), constant(at::scalar_tensor(0.5, at::kDouble))},
            {1001});
  addBodyOp(*rec, 101, 0, "aten::add", "Tensor",
            {val::ref(1001), constant(at::scalar_tensor(1, at::kLong))},
            {1002});
  auto *rank = rec->add_body();
  rank->set_id(102);
  rank->mutable_rank_tensor()->set_result(1003);
  addBodyOp(*rec, 103, 0, "aten::add_", "Tensor",
            {constant(at::zeros({3})), val::ref(1002)}, {1004});
  addBodyOp(*rec, 104, 0, "aten::neg", "", {val::ref(1004)}, {1005});
  at::Tensor X = at::arange(3, at::kFloat);
  int64_t x = b.op(0, "aten::clone", "", {constant(X)});
  int64_t f1 = b.fetch(0, callRecording(b, 1, {x}));
  int64_t f2 = b.fetch(0, callRecording(b, 1, {x}));
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  EXPECT_EQ(h.debugCount("recording 1: instructions 100..101 outlined"), 1u);
  EXPECT_EQ(h.debugCount("recording 1: instructions 103..104 not outlined: "
                         "aten::add_.Tensor may write or return a tensor "
                         "constant"),
            1u);
  for (int64_t f : {f1, f2})
    EXPECT_TRUE(at::equal(h.value(f), -(X * 0.5 + 1))) << h.value(f);
}
