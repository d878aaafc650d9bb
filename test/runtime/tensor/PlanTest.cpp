//===- PlanTest.cpp - Plan loading, validation and the Gloo backend -------===//

#include "monarch/tensor/Plan.h"
#include "monarch/tensor/Collectives.h"
#include "monarch/tensor/PlanBuilder.h"
#include "monarch/tensor/TempDir.h"

#include <gtest/gtest.h>

#include <chrono>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <future>
#include <numeric>
#include <thread>

using namespace monarch::tensor;
namespace plan = monarch::plan;

namespace {

PlanBuilder smallPlan() {
  PlanBuilder b({{"host", 2}, {"gpu", 2}});
  int64_t x = b.op(b.root(), "aten::ones", "", {val::ints({2, 2})});
  int64_t y = b.op(b.root(), "aten::add", "Tensor", {val::ref(x), val::ref(x)});
  b.fetch(b.root(), y);
  return b;
}

TEST(Plan, RoundTripsAndValidates) {
  PlanBuilder b = smallPlan();
  auto loaded = loadPlan(b.serialize());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->instructions_size(), 3);
  EXPECT_EQ(loaded->version(), kPlanVersion);
}

TEST(Plan, CorruptedBytesAreRefused) {
  std::string bytes = smallPlan().serialize();
  // Truncation in the middle of a length-delimited field.
  auto truncated = loadPlan(bytes.substr(0, bytes.size() / 2));
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("corrupted plan"),
            std::string::npos)
      << truncated.status().message();
  auto garbage = loadPlan(std::string("\xff\xff\xff\xff garbage", 12));
  ASSERT_FALSE(garbage.ok());
}

TEST(Plan, BadMagicIsRefused) {
  PlanBuilder b = smallPlan();
  b.program().set_magic(0x1234);
  auto loaded = loadPlan(b.serialize());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("not a monarch plan"),
            std::string::npos);
}

TEST(Plan, FutureVersionIsRefusedWithAClearMessage) {
  PlanBuilder b = smallPlan();
  b.program().set_version(kPlanVersion + 1);
  auto loaded = loadPlan(b.serialize());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find(
                "version " + std::to_string(kPlanVersion + 1) +
                " is newer than this runtime supports"),
            std::string::npos)
      << loaded.status().message();
}

TEST(Plan, RefUsedBeforeDefinitionIsRefused) {
  PlanBuilder b({{"x", 2}});
  b.op(b.root(), "aten::neg", "", {val::ref(42)});
  auto s = validatePlan(b.program());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("ref 42 used before it is defined"),
            std::string::npos)
      << s.message();
}

TEST(Plan, DeletedRefCannotBeUsed) {
  PlanBuilder b({{"x", 2}});
  int64_t t = b.op(b.root(), "aten::ones", "", {val::ints({1})});
  b.deleteRefs(b.root(), {t});
  b.fetch(b.root(), t);
  auto s = validatePlan(b.program());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("used before it is defined"), std::string::npos);
}

TEST(Plan, UnknownMeshStreamAndDimAreRefused) {
  {
    PlanBuilder b({{"x", 2}});
    b.add(7).mutable_request_status();
    auto s = validatePlan(b.program());
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("unknown mesh 7"), std::string::npos);
  }
  {
    PlanBuilder b({{"x", 2}});
    b.add(0, 3).mutable_request_status();
    auto s = validatePlan(b.program());
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("unknown stream 3"), std::string::npos);
  }
  {
    PlanBuilder b({{"x", 2}});
    b.rank(b.root(), {"y"});
    auto s = validatePlan(b.program());
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("unknown dim 'y'"), std::string::npos);
  }
}

TEST(Plan, MeshOutsideRootIsRefused) {
  PlanBuilder b({{"x", 2}});
  auto *m = b.program().add_meshes();
  m->set_id(1);
  m->set_offset(1);
  auto *d = m->add_dims();
  d->set_name("x");
  d->set_size(2);
  d->set_stride(1);
  auto s = validatePlan(b.program());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("outside the root mesh"), std::string::npos);
}

TEST(Plan, MeshSizesAreCheckedArithmeticallyNotByEnumeration) {
  // 2^40 ranks used to end in std::bad_alloc, 2^31 - 1 took 27 s and 17 GB
  // before it was refused: now both are refused at once.
  for (int64_t size : {int64_t{1} << 40, int64_t{2147483647},
                       monarch::mesh::kMaxMeshRanks + 1}) {
    PlanBuilder b({{"x", 2}});
    b.program().mutable_root(0)->set_size(size);
    auto start = std::chrono::steady_clock::now();
    auto s = validatePlan(b.program());
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::milliseconds(500));
    ASSERT_FALSE(s.isOk()) << size;
    EXPECT_NE(s.message().find("a mesh holds at most 1048576 ranks"),
              std::string::npos)
        << s.message();
  }
  // A view as large as the largest root, and a stride-0 view as large as a
  // mesh may be: accepted without listing their ranks.
  PlanBuilder big({{"a", 1024}, {"b", 1024}});
  auto *m = big.program().add_meshes();
  m->set_id(1);
  auto *d = m->add_dims();
  d->set_name("x");
  d->set_size(monarch::mesh::kMaxMeshRanks);
  d->set_stride(0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(validatePlan(big.program()).isOk());
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(500));
  // Past it: refused however the sizes multiply out.
  d->set_size(int64_t{1} << 62);
  auto s = validatePlan(big.program());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("at most 1048576 ranks"), std::string::npos)
      << s.message();
}

TEST(Plan, PlannedTensorTypesMustFitInMemoryArithmetic) {
  auto withMeta = [](std::vector<int64_t> shape) {
    PlanBuilder b({{"x", 2}});
    int64_t t = b.op(b.root(), "aten::ones", "", {val::ints({2})});
    b.reduce(b.root(), t, meta(plan::FLOAT32, shape), {"x"}, plan::SUM);
    return validatePlan(b.program());
  };
  EXPECT_TRUE(withMeta({int64_t{1} << 40, 4}).isOk()); // large but countable
  auto negative = withMeta({2, -1});
  ASSERT_FALSE(negative.isOk());
  EXPECT_NE(negative.message().find("negative size"), std::string::npos);
  auto overflow = withMeta({int64_t{1} << 62, 4});
  ASSERT_FALSE(overflow.isOk());
  EXPECT_NE(overflow.message().find("2^63 bytes"), std::string::npos);
}

TEST(Plan, ReduceNeedsMetaAndKnownDims) {
  PlanBuilder b({{"x", 2}});
  int64_t t = b.op(b.root(), "aten::ones", "", {val::ints({2})});
  b.reduce(b.root(), t, plan::TensorMeta(), {"x"}, plan::SUM);
  EXPECT_FALSE(validatePlan(b.program()).isOk());
  PlanBuilder c({{"x", 2}});
  int64_t u = c.op(c.root(), "aten::ones", "", {val::ints({2})});
  c.reduce(c.root(), u, meta(plan::FLOAT32, {2}), {"nope"}, plan::SUM);
  auto s = validatePlan(c.program());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("nope"), std::string::npos);
}

TEST(Plan, RecordingsAreCheckedAgainstTheirCalls) {
  PlanBuilder b({{"x", 1}});
  auto &def = b.add(0);
  auto *rec = def.mutable_define_recording()->mutable_recording();
  rec->set_id(1);
  rec->add_formals(100);
  rec->add_results(101);
  auto *body = rec->add_body();
  body->set_id(1000);
  auto *call = body->mutable_call_op();
  call->set_name("aten::neg");
  *call->add_args() = val::ref(100);
  call->add_results(101);
  int64_t x = b.op(0, "aten::ones", "", {val::ints({1})});
  auto *c = b.add(0).mutable_call_recording();
  c->set_recording(1);
  c->add_actuals(x);
  c->add_results(b.ref());
  ASSERT_TRUE(validatePlan(b.program()).isOk())
      << validatePlan(b.program()).message();
  c->add_actuals(x); // wrong arity
  auto s = validatePlan(b.program());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("takes 1 actuals"), std::string::npos);
}

/// A plan: x = ones(2); recording 1 (a, s) -> (a + s); a loop over it
/// (instruction 2, loopIn).
PlanBuilder loopPlan() {
  PlanBuilder b({{"x", 2}});
  auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
  rec->set_id(1);
  rec->add_formals(100);
  rec->add_formals(101);
  rec->add_results(102);
  auto *body = rec->add_body();
  body->set_id(1000);
  auto *call = body->mutable_call_op();
  call->set_name("aten::add");
  call->set_overload("Tensor");
  *call->add_args() = val::ref(100);
  *call->add_args() = val::ref(101);
  call->add_results(102);
  int64_t x = b.op(0, "aten::ones", "", {val::ints({2})});
  plan::Loop *loop = b.add(0).mutable_loop();
  loop->set_recording(1);
  loop->set_trips(10);
  loop->add_carried(x);
  loop->add_induction()->set_mesh(0);
  loop->add_results(b.ref());
  return b;
}

plan::Loop &loopIn(PlanBuilder &b) {
  return *b.program().mutable_instructions(2)->mutable_loop();
}

TEST(Plan, LoopsAreCheckedAgainstTheirRecording) {
  PlanBuilder ok = loopPlan();
  ASSERT_TRUE(validatePlan(ok.program()).isOk())
      << validatePlan(ok.program()).message();
  // Each rule, on its own copy of the plan.
  auto refused = [](void (*edit)(plan::Loop &), const std::string &message) {
    PlanBuilder b = loopPlan();
    edit(loopIn(b));
    Status s = validatePlan(b.program());
    EXPECT_FALSE(s.isOk()) << message;
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
  };
  refused([](plan::Loop &l) { l.set_recording(2); }, "unknown recording 2");
  refused([](plan::Loop &l) { l.set_trips(-3); },
          "trips is -3, a loop runs 0 or more times");
  refused([](plan::Loop &l) { l.set_trips(kMaxLoopTrips + 1); },
          "more than the most a loop may run (2147483647)");
  refused([](plan::Loop &l) { l.add_captured(1); },
          "recording 1 takes 2 formals and 1 results, but the loop passes 1 "
          "carried, 1 captured and 1 induction values and binds 1 results");
  refused([](plan::Loop &l) { l.set_trips(0); },
          "a loop of 0 trips cannot carry values");
  refused(
      [](plan::Loop &l) {
        l.set_lower(INT64_MAX - 5);
        l.set_step(1);
      },
      "the induction variable overflows int64");
  refused([](plan::Loop &l) { l.mutable_induction(0)->set_mesh(7); },
          "induction on unknown mesh 7");
  refused([](plan::Loop &l) { l.mutable_induction(0)->set_stream(3); },
          "induction on unknown stream 3");
  refused([](plan::Loop &l) { l.add_consumed(5); },
          "consumed ref 5 is not a carried value");
  refused(
      [](plan::Loop &l) {
        l.add_consumed(1);
        l.add_consumed(1);
      },
      "consumed ref 1 is listed twice");
  // Refs: carried and captured must be defined; a consumed one is gone.
  refused([](plan::Loop &l) { l.set_carried(0, 42); },
          "ref 42 used before it is defined");
  {
    PlanBuilder b = loopPlan();
    loopIn(b).add_consumed(1);
    ASSERT_TRUE(validatePlan(b.program()).isOk());
    b.fetch(0, 1);
    Status s = validatePlan(b.program());
    EXPECT_NE(s.message().find("ref 1 used before it is defined"),
              std::string::npos)
        << s.message();
  }
}

TEST(Plan, LoopRefsAreVisitedAndMapped) {
  PlanBuilder b = loopPlan();
  loopIn(b).add_captured(1);
  loopIn(b).add_consumed(1);
  plan::Instruction inst = b.program().instructions(2);
  ASSERT_TRUE(inst.has_loop());
  EXPECT_STREQ(kindName(inst), "loop");
  std::vector<std::pair<int64_t, RefRole>> seen;
  visitRefs(inst, [&](int64_t r, RefRole role) { seen.emplace_back(r, role); });
  std::vector<std::pair<int64_t, RefRole>> want{{1, RefRole::Read},
                                                {1, RefRole::Read},
                                                {1, RefRole::Delete},
                                                {2, RefRole::Define}};
  EXPECT_EQ(seen, want);
  mapRefs(inst, [](int64_t r) { return r + 1000; });
  EXPECT_EQ(inst.loop().carried(0), 1001);
  EXPECT_EQ(inst.loop().captured(0), 1001);
  EXPECT_EQ(inst.loop().consumed(0), 1001);
  EXPECT_EQ(inst.loop().results(0), 1002);
}

TEST(Plan, MapRefsRenamesEveryRef) {
  PlanBuilder b({{"x", 1}});
  int64_t x = b.op(0, "aten::cat", "", {val::refs({1, 2}), val::i(0)}, 1, 0,
                   {{"out", val::optional(val::ref(3))}});
  (void)x;
  plan::Instruction inst = b.program().instructions(0);
  mapRefs(inst, [](int64_t r) { return r + 1000; });
  std::vector<int64_t> seen;
  visitRefs(inst, [&](int64_t r, RefRole) { seen.push_back(r); });
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{1001, 1001, 1002, 1003}));
}

TEST(FileStore, SetGetAndTimeout) {
  TempDir dir("store");
  FileStore store(dir.path());
  ASSERT_TRUE(store.set("a/b:c", {'x', 'y'}).isOk());
  auto v = store.get("a/b:c", std::chrono::milliseconds(100));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value(), (std::vector<char>{'x', 'y'}));
  // Keys that escape to the same file name stay distinct.
  auto missing = store.get("a_b_c", std::chrono::milliseconds(30));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("timed out"), std::string::npos);
}

/// Runs `fn(rank, communicator)` on `n` threads, each with its own backend
/// (as separate processes would), all rendezvousing in one directory.
template <typename Fn> void onRanks(int n, Fn fn) {
  TempDir tmp("gloo");
  std::string dir = tmp.path();
  std::vector<std::future<void>> done;
  for (int r = 0; r < n; ++r)
    done.push_back(std::async(std::launch::async, [=] {
      GlooOptions o;
      o.timeout = std::chrono::seconds(20);
      auto backend = makeGlooBackend(std::make_shared<FileStore>(dir), o);
      std::vector<int64_t> ranks(n);
      std::iota(ranks.begin(), ranks.end(), 0);
      auto comm = backend->connect("test", ranks, r);
      ASSERT_TRUE(comm.ok()) << comm.status().message();
      fn(r, *comm.value());
    }));
  for (auto &f : done)
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
}

TEST(Gloo, AllreduceKindsAndDtypes) {
  onRanks(3, [](int r, Communicator &c) {
    std::vector<float> f{float(r + 1), float(-r)};
    ASSERT_TRUE(
        c.allreduce({f.data(), 2, plan::FLOAT32}, ReduceKind::Sum).isOk());
    EXPECT_EQ(f, (std::vector<float>{6, -3}));
    std::vector<int64_t> i{r + 2};
    ASSERT_TRUE(
        c.allreduce({i.data(), 1, plan::INT64}, ReduceKind::Product).isOk());
    EXPECT_EQ(i[0], 2 * 3 * 4);
    std::vector<double> m{double(r)};
    ASSERT_TRUE(
        c.allreduce({m.data(), 1, plan::FLOAT64}, ReduceKind::Max).isOk());
    EXPECT_EQ(m[0], 2.0);
    std::vector<int32_t> mn{10 - r};
    ASSERT_TRUE(
        c.allreduce({mn.data(), 1, plan::INT32}, ReduceKind::Min).isOk());
    EXPECT_EQ(mn[0], 8);
    std::vector<uint8_t> b{1};
    auto bad = c.allreduce({b.data(), 1, plan::BOOL}, ReduceKind::Sum);
    EXPECT_FALSE(bad.isOk());
  });
}

TEST(Gloo, GatherScatterAlltoallAndPointToPoint) {
  onRanks(2, [](int r, Communicator &c) {
    std::vector<int32_t> in{r * 10, r * 10 + 1};
    std::vector<int32_t> out(4);
    ASSERT_TRUE(
        c.allgather({in.data(), 2, plan::INT32}, {out.data(), 4, plan::INT32})
            .isOk());
    EXPECT_EQ(out, (std::vector<int32_t>{0, 1, 10, 11}));
    std::vector<int32_t> a2a(2);
    ASSERT_TRUE(
        c.alltoall({in.data(), 2, plan::INT32}, {a2a.data(), 2, plan::INT32})
            .isOk());
    EXPECT_EQ(a2a, (std::vector<int32_t>{r, 10 + r}));
    std::vector<float> rs{1.f + r, 2.f + r};
    std::vector<float> mine(1);
    ASSERT_TRUE(c.reduceScatter({rs.data(), 2, plan::FLOAT32},
                                {mine.data(), 1, plan::FLOAT32},
                                ReduceKind::Sum)
                    .isOk());
    EXPECT_EQ(mine[0], r == 0 ? 3.f : 5.f);
    // Both ranks send and receive at once: must not deadlock.
    std::vector<int64_t> mineV{r + 100}, theirs{0};
    ASSERT_TRUE(c.sendRecv({{{mineV.data(), 1, plan::INT64}, 1 - r}},
                           {{{theirs.data(), 1, plan::INT64}, 1 - r}}, 7)
                    .isOk());
    EXPECT_EQ(theirs[0], 1 - r + 100);
  });
}

/// A member's death is told to the live members, which abort their
/// communicators with it (Executor::rankFailed): an allreduce already
/// waiting on the dead member must fail then, not at its 20 s timeout.
/// Here rank 1 stays connected but never joins; rank 0's allreduce is
/// aborted from another thread once it has begun.
TEST(Gloo, AbortFailsAnAllreduceWaitingOnAMember) {
  std::promise<void> rank0Done, rank1Connected;
  std::shared_future<void> finished = rank0Done.get_future().share();
  std::shared_future<void> connected = rank1Connected.get_future().share();
  onRanks(2, [&](int r, Communicator &c) {
    if (r == 1) {
      // Connected, silent: only the abort can end rank 0's wait early.
      rank1Connected.set_value();
      EXPECT_EQ(finished.wait_for(std::chrono::seconds(30)),
                std::future_status::ready);
      return;
    }
    // Both ends connected first: an abort while rank 1 still connects
    // would fail its connect instead.
    ASSERT_EQ(connected.wait_for(std::chrono::seconds(30)),
              std::future_status::ready);
    std::atomic<bool> started{false};
    std::thread aborter([&] {
      while (!started.load())
        std::this_thread::yield();
      c.abort();
    });
    std::vector<float> f{1, 2};
    auto begin = std::chrono::steady_clock::now();
    started = true;
    Status st = c.allreduce({f.data(), 2, plan::FLOAT32}, ReduceKind::Sum);
    auto took = std::chrono::steady_clock::now() - begin;
    aborter.join();
    EXPECT_FALSE(st.isOk());
    EXPECT_LT(took, std::chrono::seconds(5))
        << "the aborted allreduce waited for its timeout: " << st.message();
    // Aborted for good: the next collective fails at once too.
    EXPECT_FALSE(
        c.allreduce({f.data(), 2, plan::FLOAT32}, ReduceKind::Sum).isOk());
    rank0Done.set_value();
  });
}

TEST(Nccl, SkipsWithoutAGpu) {
  if (!ncclAvailable())
    GTEST_SKIP() << "no CUDA device (or built without NCCL): the NCCL backend "
                    "runs on the GPU machine only";
  TempDir dir("nccl");
  EXPECT_NE(makeNcclBackend(std::make_shared<FileStore>(dir.path()),
                            std::chrono::seconds(10)),
            nullptr);
}

} // namespace
