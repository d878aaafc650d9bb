//===- LoopTest.cpp - The `loop` instruction in one executor --------------===//
//
// docs/plan.md, `loop`: iterations of a recording where iteration k's results
// are iteration k + 1's carried values, captured values are the same every
// iteration and induction tensors hold lower + k * step. Every behaviour is
// checked on both ways the executor runs a loop: one task over a compiled
// body (plain ATen calls on one stream) and the expansion one iteration at a
// time (any body; here a rank tensor the body does not use keeps it from
// compiling).
//
//===----------------------------------------------------------------------===//

#include "ExecutorHarness.h"

#include "monarch/tensor/Plan.h"
#include "monarch/tensor/PlanBuilder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace monarch::tensor;
using namespace monarch::tensor::testing;
namespace plan = monarch::plan;

namespace {

/// Builds a recording's body; its instruction ids count from `firstId`.
struct Body {
  plan::Recording *rec;
  int64_t nextId;

  plan::Instruction &add(int64_t mesh = 0, int64_t stream = 0) {
    plan::Instruction *inst = rec->add_body();
    inst->set_id(nextId++);
    inst->set_mesh(mesh);
    inst->set_stream(stream);
    return *inst;
  }
  /// An ATen call; returns its instruction id.
  int64_t op(const std::string &name, const std::string &overload,
             const std::vector<plan::Value> &args,
             const std::vector<int64_t> &results, int64_t stream = 0) {
    plan::Instruction &inst = add(0, stream);
    auto *call = inst.mutable_call_op();
    call->set_name(name);
    call->set_overload(overload);
    for (const plan::Value &a : args)
      *call->add_args() = a;
    for (int64_t r : results)
      call->add_results(r);
    return inst.id();
  }
  /// Something the compiled path does not take: the body is then expanded.
  void forceExpansion(int64_t ref) {
    add().mutable_rank_tensor()->set_result(ref);
    add().mutable_delete_refs()->add_refs(ref);
  }
};

Body define(PlanBuilder &b, int64_t id, const std::vector<int64_t> &formals,
            const std::vector<int64_t> &results) {
  auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
  rec->set_id(id);
  for (int64_t f : formals)
    rec->add_formals(f);
  for (int64_t r : results)
    rec->add_results(r);
  return Body{rec, id * 1000};
}

struct LoopSpec {
  int64_t recording = 1;
  int64_t trips = 1;
  std::vector<int64_t> carried, captured, consumed;
  /// (mesh, stream) of each induction tensor.
  std::vector<std::pair<int64_t, int64_t>> induction;
  int64_t lower = 0, step = 1;
  /// Results to bind; -1: one fresh ref per carried value.
  int nresults = -1;
};

/// Appends a loop; returns its results.
std::vector<int64_t> addLoop(PlanBuilder &b, const LoopSpec &spec,
                             const std::string &location = "train.py:7") {
  auto *l = b.add(0, 0, location).mutable_loop();
  l->set_recording(spec.recording);
  l->set_trips(spec.trips);
  l->set_lower(spec.lower);
  l->set_step(spec.step);
  for (int64_t r : spec.carried)
    l->add_carried(r);
  for (int64_t r : spec.captured)
    l->add_captured(r);
  for (int64_t r : spec.consumed)
    l->add_consumed(r);
  for (auto [mesh, stream] : spec.induction) {
    auto *ind = l->add_induction();
    ind->set_mesh(mesh);
    ind->set_stream(stream);
  }
  std::vector<int64_t> results;
  int n =
      spec.nresults < 0 ? static_cast<int>(spec.carried.size()) : spec.nresults;
  for (int i = 0; i < n; ++i) {
    results.push_back(b.ref());
    l->add_results(results.back());
  }
  return results;
}

const char *pathName(bool expand) { return expand ? "expanded" : "compiled"; }

TEST(Loop, ValuesAfterOneThreeAndAThousandIterations) {
  // body(acc, w) = acc + w: after n trips acc = n * w.
  for (int64_t trips : {1, 3, 1000})
    for (bool expand : {false, true}) {
      SCOPED_TRACE(std::string(pathName(expand)) + ", " +
                   std::to_string(trips) + " trips");
      PlanBuilder b({{"x", 1}});
      Body body = define(b, 1, {100, 101}, {102});
      body.op("aten::add", "Tensor", {val::ref(100), val::ref(101)}, {102});
      if (expand)
        body.forceExpansion(103);
      at::Tensor W = at::arange(4, at::kFloat);
      int64_t x0 = b.op(0, "aten::zeros", "", {val::ints({4})});
      int64_t w = b.op(0, "aten::clone", "", {constant(W)});
      LoopSpec spec;
      spec.trips = trips;
      spec.carried = {x0};
      spec.captured = {w};
      int64_t x = addLoop(b, spec)[0];
      int64_t f = b.fetch(0, x), fw = b.fetch(0, w);
      Harness h;
      h.run(b);
      ASSERT_TRUE(h.failures.empty()) << h.allFailures();
      EXPECT_TRUE(at::equal(h.value(f), W * static_cast<double>(trips)));
      EXPECT_TRUE(at::equal(h.value(fw), W));
      // x0, w and the result: every iteration's locals and carried values
      // were freed.
      EXPECT_EQ(h.executor->liveRefs(), 3u);
    }
}

TEST(Loop, CarriedValuesAreThePreviousIterationsResults) {
  // (a, b) -> (b, a + b) from (0, 1): Fibonacci, 10 trips give (55, 89).
  for (bool expand : {false, true}) {
    SCOPED_TRACE(pathName(expand));
    PlanBuilder b({{"x", 1}});
    Body body = define(b, 1, {100, 101}, {102, 103});
    body.op("aten::alias", "", {val::ref(101)}, {102});
    body.op("aten::add", "Tensor", {val::ref(100), val::ref(101)}, {103});
    if (expand)
      body.forceExpansion(104);
    int64_t a = b.op(0, "aten::zeros", "", {val::ints({2})});
    int64_t c = b.op(0, "aten::ones", "", {val::ints({2})});
    LoopSpec spec;
    spec.trips = 10;
    spec.carried = {a, c};
    std::vector<int64_t> r = addLoop(b, spec);
    int64_t f0 = b.fetch(0, r[0]), f1 = b.fetch(0, r[1]);
    Harness h;
    h.run(b);
    ASSERT_TRUE(h.failures.empty()) << h.allFailures();
    EXPECT_TRUE(at::equal(h.value(f0), at::full({2}, 55.f)));
    EXPECT_TRUE(at::equal(h.value(f1), at::full({2}, 89.f)));
  }
}

TEST(Loop, InductionTensorsHoldLowerPlusKTimesStep) {
  // body(acc, s) = acc + s with s the induction tensor: lower 5, step 3,
  // 4 trips: 5 + 8 + 11 + 14 = 38. The last s is fetched inside the body
  // (the expanded path; a fetch does not compile) and its dtype is int64.
  for (bool expand : {false, true}) {
    SCOPED_TRACE(pathName(expand));
    PlanBuilder b({{"x", 1}});
    Body body = define(b, 1, {100, 101}, {102});
    body.op("aten::add", "Tensor", {val::ref(100), val::ref(101)}, {102});
    int64_t fetchInBody = -1;
    if (expand) {
      plan::Instruction &f = body.add();
      f.mutable_fetch()->set_ref(101);
      fetchInBody = f.id();
    }
    int64_t acc = b.op(0, "aten::zeros", "", {val::ints({})}, 1, 0,
                       {{"dtype", val::dtype(plan::INT64)}});
    LoopSpec spec;
    spec.trips = 4;
    spec.carried = {acc};
    spec.induction = {{0, 0}};
    spec.lower = 5;
    spec.step = 3;
    int64_t f = b.fetch(0, addLoop(b, spec)[0]);
    Harness h;
    h.run(b);
    ASSERT_TRUE(h.failures.empty()) << h.allFailures();
    at::Tensor sum = h.value(f);
    EXPECT_EQ(sum.scalar_type(), at::kLong);
    EXPECT_EQ(sum.item<int64_t>(), 38);
    if (expand) {
      at::Tensor last = h.value(fetchInBody);
      EXPECT_EQ(last.scalar_type(), at::kLong);
      EXPECT_EQ(last.dim(), 0);
      EXPECT_EQ(last.item<int64_t>(), 14);
    }
    // acc and the result: the induction tensors went with their iterations.
    EXPECT_EQ(h.executor->liveRefs(), 2u);
  }
}

TEST(Loop, ConsumedCarriedValuesAreFreedAfterTheFirstIteration) {
  for (bool expand : {false, true}) {
    SCOPED_TRACE(pathName(expand));
    PlanBuilder b({{"x", 1}});
    Body body = define(b, 1, {100}, {101});
    body.op("aten::mul", "Scalar", {val::ref(100), val::scalar(2)}, {101});
    if (expand)
      body.forceExpansion(102);
    int64_t x0 = b.op(0, "aten::ones", "", {val::ints({3})});
    LoopSpec spec;
    spec.trips = 5;
    spec.carried = {x0};
    spec.consumed = {x0};
    int64_t f = b.fetch(0, addLoop(b, spec)[0]);
    // x0 is gone after the loop: a plan may not name it again (the loader
    // refuses it), and an unchecked one finds nothing there.
    int64_t gone = b.fetch(0, x0);
    EXPECT_FALSE(validatePlan(b.program()).isOk());
    Harness h;
    h.run(b, /*validate=*/false);
    EXPECT_TRUE(at::equal(h.value(f), at::full({3}, 32.f)));
    EXPECT_NE(h.error(gone).message().find("is not defined"),
              std::string::npos);
    EXPECT_EQ(h.executor->liveRefs(), 1u); // the result only
  }
}

TEST(Loop, FailuresNameTheirIteration) {
  // t = index_select(acc, 0, s) fails once s reaches acc's size (3), in
  // iteration 3; acc + t then is an error, so iteration 4 only has
  // dependent errors: one failure, located in its iteration.
  for (bool expand : {false, true}) {
    SCOPED_TRACE(pathName(expand));
    PlanBuilder b({{"x", 1}});
    Body body = define(b, 1, {100, 101}, {103});
    int64_t select = body.op("aten::index_select", "",
                             {val::ref(100), val::i(0), val::ref(101)}, {102});
    body.op("aten::add", "Tensor", {val::ref(100), val::ref(102)}, {103});
    if (expand)
      body.forceExpansion(104);
    int64_t acc = b.op(0, "aten::zeros", "", {val::ints({3})});
    LoopSpec spec;
    spec.trips = 5;
    spec.carried = {acc};
    spec.induction = {{0, 0}};
    int64_t result = addLoop(b, spec)[0];
    int64_t loopId = Harness::last(b);
    int64_t f = b.fetch(0, result);
    Harness h;
    h.run(b);
    ASSERT_EQ(h.failures.size(), 1u) << h.allFailures();
    EXPECT_EQ(h.failures[0].instruction(), select);
    EXPECT_NE(h.failures[0].location().find(
                  "(recording 1, iteration 3 of loop instruction " +
                  std::to_string(loopId) + " at train.py:7)"),
              std::string::npos)
        << h.failures[0].location();
    EXPECT_EQ(h.error(f).instruction(), select);
  }
}

TEST(Loop, LongExpandedLoopWithBorrowsRunsInBoundedQueues) {
  // A DDP-shaped body (borrow onto "comm", add there, drop) 20,000 times:
  // about 100,000 stream tasks, more than the expansion queues ahead of the
  // streams at once, so it waits for them (throttleLoop) and still ends.
  PlanBuilder b({{"x", 1}});
  int64_t comm = b.stream("comm");
  Body body = define(b, 1, {100}, {});
  {
    auto *bc = body.add(0, comm).mutable_borrow_create();
    bc->set_borrow(1);
    bc->set_input(100);
    bc->set_from_stream(0);
    bc->set_mutable_(true);
    bc->set_result(101);
  }
  body.op("aten::add_", "Scalar", {val::ref(101), val::scalar(1)}, {}, comm);
  body.add().mutable_borrow_drop()->set_borrow(1);
  int64_t x = b.op(0, "aten::zeros", "", {val::ints({2})});
  LoopSpec spec;
  spec.trips = 20000;
  spec.captured = {x};
  addLoop(b, spec);
  int64_t f = b.fetch(0, x);
  Harness h({}, false, std::chrono::seconds(60));
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  EXPECT_TRUE(at::equal(h.value(f), at::full({2}, 20000.f)));
  EXPECT_EQ(h.executor->liveRefs(), 1u);
}

TEST(Loop, TheCompiledLoopIsOneTask) {
  // Traced, both paths report each body instruction once per iteration;
  // only the expansion makes the induction tensors as instructions of
  // their own (aten::scalar_tensor under the loop's id).
  for (bool expand : {false, true}) {
    SCOPED_TRACE(pathName(expand));
    PlanBuilder b({{"x", 1}});
    Body body = define(b, 1, {100, 101}, {102});
    int64_t add =
        body.op("aten::add", "Tensor", {val::ref(100), val::ref(101)}, {102});
    if (expand)
      body.forceExpansion(103);
    int64_t acc = b.op(0, "aten::zeros", "", {val::ints({})}, 1, 0,
                       {{"dtype", val::dtype(plan::INT64)}});
    LoopSpec spec;
    spec.trips = 7;
    spec.carried = {acc};
    spec.induction = {{0, 0}};
    addLoop(b, spec);
    int64_t loopId = Harness::last(b);
    Harness h({}, /*trace=*/true);
    h.run(b);
    ASSERT_TRUE(h.failures.empty()) << h.allFailures();
    int adds = 0, inductions = 0;
    for (const plan::TraceEvent &e : h.traces) {
      if (e.instruction() == add) {
        ++adds;
        EXPECT_EQ(e.recording(), 1);
      }
      if (e.instruction() == loopId && e.name() == "aten::scalar_tensor")
        ++inductions;
    }
    EXPECT_EQ(adds, 7);
    EXPECT_EQ(inductions, expand ? 7 : 0);
  }
}

TEST(Loop, BadLoopsFailTheirInstruction) {
  // Submitted unchecked (as eager instructions are): each rule fails the
  // loop itself, its results become that error, and nothing of the body
  // runs.
  struct Case {
    std::string name, message;
    LoopSpec spec;
  };
  std::vector<Case> cases;
  auto spec = [](auto edit) {
    LoopSpec s;
    s.trips = 2;
    s.carried = {1};
    edit(s);
    return s;
  };
  cases.push_back({"unknown recording", "unknown recording 9",
                   spec([](LoopSpec &s) { s.recording = 9; })});
  cases.push_back({"negative trips", "trips is -1, a loop runs 0 or more times",
                   spec([](LoopSpec &s) { s.trips = -1; })});
  cases.push_back({"too many trips",
                   "trips is 2147483648, more than the most a loop may run "
                   "(2147483647)",
                   spec([](LoopSpec &s) { s.trips = kMaxLoopTrips + 1; })});
  cases.push_back(
      {"mismatched counts",
       "recording 1 takes 1 formals and 1 results, but the loop passes 1 "
       "carried, 1 captured and 0 induction values and binds 1 results",
       spec([](LoopSpec &s) { s.captured = {1}; })});
  cases.push_back({"results", "binds 2 results",
                   spec([](LoopSpec &s) { s.nresults = 2; })});
  cases.push_back({"zero trips carrying",
                   "a loop of 0 trips cannot carry values",
                   spec([](LoopSpec &s) { s.trips = 0; })});
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    PlanBuilder b({{"x", 1}});
    Body body = define(b, 1, {100}, {101});
    body.op("aten::neg", "", {val::ref(100)}, {101});
    int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
    ASSERT_EQ(x, 1);
    std::vector<int64_t> r = addLoop(b, c.spec);
    int64_t loopId = Harness::last(b);
    // The loader refuses every one of them with the same message.
    Status loaded = validatePlan(b.program());
    ASSERT_FALSE(loaded.isOk());
    EXPECT_NE(loaded.message().find(c.message), std::string::npos)
        << loaded.message();
    int64_t f = b.fetch(0, r[0]);
    Harness h;
    h.run(b, /*validate=*/false);
    ASSERT_EQ(h.failuresFor(loopId).size(), 1u) << h.allFailures();
    EXPECT_NE(h.failuresFor(loopId)[0].message().find(c.message),
              std::string::npos)
        << h.failuresFor(loopId)[0].message();
    EXPECT_EQ(h.error(f).instruction(), loopId);
    EXPECT_EQ(h.failures.size(), 1u) << h.allFailures();
  }
}

TEST(Loop, ZeroTripsWithoutCarriedValuesRunNothing) {
  PlanBuilder b({{"x", 1}});
  Body body = define(b, 1, {100}, {});
  body.op("aten::add_", "Scalar", {val::ref(100), val::scalar(1)}, {});
  int64_t x = b.op(0, "aten::zeros", "", {val::ints({2})});
  LoopSpec spec;
  spec.trips = 0;
  spec.captured = {x};
  addLoop(b, spec);
  int64_t f = b.fetch(0, x);
  Harness h;
  h.run(b);
  ASSERT_TRUE(h.failures.empty()) << h.allFailures();
  EXPECT_TRUE(at::equal(h.value(f), at::zeros({2})));
}

} // namespace
