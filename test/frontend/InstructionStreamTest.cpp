//===- InstructionStreamTest.cpp - The frontend's instruction stream ------===//
//
// Templates and their placeholders, batching (size, delay, explicit
// flush), the order batches leave in, deletes after the uses in their batch,
// errors that stick, and recording a TracedProgram.
//
//===----------------------------------------------------------------------===//

#include "InstructionStream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

using namespace monarch;
using namespace monarch::frontend;
using namespace std::chrono_literals;

namespace {

/// Records every batch it is given; waits on a condition, never sleeps.
struct Sink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<plan::InstructionBatch> batches;
  Status next;

  BatchSink fn() {
    return [this](const plan::InstructionBatch &b) {
      std::lock_guard<std::mutex> lock(mu);
      if (!next.isOk())
        return next;
      batches.push_back(b);
      cv.notify_all();
      return Status::ok();
    };
  }

  bool waitFor(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return batches.size() >= n; });
  }

  std::vector<plan::Instruction> all() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<plan::Instruction> out;
    for (const auto &b : batches)
      for (const auto &i : b.instructions())
        out.push_back(i);
    return out;
  }
};

plan::Value ref(int64_t r) {
  plan::Value v;
  v.set_ref(r);
  return v;
}

/// aten::add(input 0, input 1, alpha=2) -> result 0, as the frontend makes it.
std::string addTemplate() {
  plan::CallOp call;
  call.set_name("aten::add");
  call.set_overload("Tensor");
  *call.add_args() = ref(-1);
  *call.add_args() = ref(-2);
  auto *kw = call.add_kwargs();
  kw->set_name("alpha");
  kw->mutable_value()->mutable_scalar()->set_int_value(2);
  call.add_results(-1);
  return call.SerializeAsString();
}

InstructionStreamOptions noTimer(size_t maxBatch = 1000) {
  InstructionStreamOptions o;
  o.maxBatch = maxBatch;
  o.maxDelay = 0us; // no background thread: flushes are explicit or by size
  return o;
}

TEST(InstructionStream, TemplatesFillInputsAndResults) {
  Sink sink;
  InstructionStream s(sink.fn(), noTimer());
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok()) << t.status().toString();
  int64_t loc = s.location("prog.py:3");
  EXPECT_EQ(s.location("prog.py:3"), loc); // interned
  auto id = s.op(*t, 4, 1, loc, {10, 11}, {12});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 1);
  ASSERT_TRUE(s.flush().isOk());
  auto all = sink.all();
  ASSERT_EQ(all.size(), 1u);
  const auto &inst = all[0];
  EXPECT_EQ(inst.id(), 1);
  EXPECT_EQ(inst.mesh(), 4);
  EXPECT_EQ(inst.stream(), 1);
  EXPECT_EQ(inst.location(), "prog.py:3");
  const auto &call = inst.call_op();
  EXPECT_EQ(call.name(), "aten::add");
  EXPECT_EQ(call.args(0).ref(), 10);
  EXPECT_EQ(call.args(1).ref(), 11);
  EXPECT_EQ(call.kwargs(0).value().scalar().int_value(), 2); // constants kept
  EXPECT_EQ(call.results(0), 12);
}

TEST(InstructionStream, PlaceholdersInsideListsAndOptionals) {
  plan::CallOp call;
  call.set_name("aten::cat");
  auto *list = call.add_args()->mutable_ref_list();
  list->add_refs(-2);
  list->add_refs(-1);
  auto *values = call.add_args()->mutable_list();
  *values->add_values() = ref(-3);
  values->add_values()->mutable_none();
  *call.add_args()->mutable_optional()->mutable_value() = ref(-1);
  call.add_results(-1);
  Sink sink;
  InstructionStream s(sink.fn(), noTimer());
  auto t = s.defineOp(call.SerializeAsString(), {});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(s.op(*t, 0, 0, s.location(""), {7, 8, 9}, {20}).ok());
  ASSERT_TRUE(s.flush().isOk());
  auto all = sink.all();
  ASSERT_EQ(all.size(), 1u);
  const auto &got = all[0].call_op();
  EXPECT_EQ(got.args(0).ref_list().refs(0), 8);
  EXPECT_EQ(got.args(0).ref_list().refs(1), 7);
  EXPECT_EQ(got.args(1).list().values(0).ref(), 9);
  EXPECT_TRUE(got.args(1).list().values(1).has_none());
  EXPECT_EQ(got.args(2).optional().value().ref(), 7);
}

TEST(InstructionStream, RefusesBadTemplatesAndCalls) {
  Sink sink;
  InstructionStream s(sink.fn(), noTimer());
  EXPECT_FALSE(s.defineOp("not a protobuf \xff\xff", {}).ok());
  plan::CallOp wrongResult;
  wrongResult.add_results(5);
  EXPECT_FALSE(s.defineOp(wrongResult.SerializeAsString(), {}).ok());
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  int64_t loc = s.location("x");
  EXPECT_FALSE(s.op(*t + 1, 0, 0, loc, {1, 2}, {3}).ok()); // unknown template
  EXPECT_FALSE(s.op(*t, 0, 0, loc, {1}, {3}).ok());        // too few inputs
  EXPECT_FALSE(s.op(*t, 0, 0, loc, {1, 2}, {}).ok());      // results
  EXPECT_FALSE(s.op(*t, 0, 0, loc + 7, {1, 2}, {3}).ok()); // location
  EXPECT_FALSE(s.raw("\xff\xff\xff").ok());
  ASSERT_TRUE(s.flush().isOk());
  EXPECT_TRUE(sink.all().empty()); // nothing refused was sent
}

TEST(InstructionStream, BatchesBySizeInIssueOrderWithDeletesAfterUses) {
  Sink sink;
  InstructionStream s(sink.fn(), noTimer(/*maxBatch=*/3));
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  int64_t loc = s.location("p.py:1");
  ASSERT_TRUE(s.op(*t, 0, 0, loc, {1, 1}, {2}).ok());
  s.deleteRef(1, 0, 0);
  ASSERT_TRUE(s.op(*t, 0, 0, loc, {2, 2}, {3}).ok());
  EXPECT_TRUE(sink.batches.empty()); // two of three: still pending
  plan::Instruction fetch;
  fetch.mutable_fetch()->set_ref(3);
  auto fid = s.raw(fetch.SerializeAsString());
  ASSERT_TRUE(fid.ok());
  EXPECT_EQ(*fid, 3);
  ASSERT_TRUE(sink.waitFor(1, 0ms)); // the third filled the batch
  auto all = sink.all();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_TRUE(all[0].has_call_op());
  EXPECT_TRUE(all[1].has_call_op());
  EXPECT_TRUE(all[2].has_fetch());
  ASSERT_TRUE(all[3].has_delete_refs()); // after every use in its batch
  EXPECT_EQ(all[3].delete_refs().refs(0), 1);
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(all[i].id(), static_cast<int64_t>(i + 1)); // unique, in order
  EXPECT_EQ(s.issued(), 3); // the DeleteRefs it added does not count
}

TEST(InstructionStream, APendingBatchLeavesWithinItsDelay) {
  Sink sink;
  InstructionStreamOptions o;
  o.maxBatch = 1000;
  o.maxDelay = 300us;
  InstructionStream s(sink.fn(), o);
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(s.op(*t, 0, 0, s.location(""), {1, 1}, {2}).ok());
  // No flush: the background thread sends it.
  ASSERT_TRUE(sink.waitFor(1));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(sink.all().size(), 1u);
}

TEST(InstructionStream, ConcurrentIssuersKeepEveryInstructionOnce) {
  Sink sink;
  InstructionStreamOptions o;
  o.maxBatch = 7;
  o.maxDelay = 50us;
  InstructionStream s(sink.fn(), o);
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  int64_t loc = s.location("");
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 500; ++i)
        ASSERT_TRUE(s.op(*t, 0, 0, loc, {k, k}, {i}).ok());
    });
  for (auto &th : threads)
    th.join();
  ASSERT_TRUE(s.flush().isOk());
  auto all = sink.all();
  ASSERT_EQ(all.size(), 2000u);
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(all[i].id(), static_cast<int64_t>(i + 1)); // sent in id order
}

TEST(InstructionStream, ASendErrorSticks) {
  Sink sink;
  sink.next = Status(ErrorCode::Closed, "workers gone");
  InstructionStream s(sink.fn(), noTimer());
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(s.op(*t, 0, 0, s.location(""), {1, 1}, {2}).ok());
  Status f = s.flush();
  EXPECT_EQ(f.code(), ErrorCode::Closed);
  auto again = s.op(*t, 0, 0, 0, {1, 1}, {3});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(), "workers gone");
}

TEST(InstructionStream, RecordsATracedProgram) {
  InstructionStream s(nullptr); // recording
  EXPECT_TRUE(s.recording());
  plan::Program root;
  root.set_magic(0x4D4F4E50);
  root.set_version(1);
  auto *dim = root.add_root();
  dim->set_name("gpu");
  dim->set_size(2);
  s.declare(root);
  plan::TensorMeta meta;
  meta.set_dtype(plan::FLOAT32);
  meta.add_shape(4);
  auto t = s.defineOp(addTemplate(), {meta});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(s.op(*t, 0, 0, s.location("a.py:1"), {1, 1}, {2}).ok());
  s.deleteRef(1, 0, 0); // nothing to delete in a traced program
  plan::Instruction reduce;
  reduce.mutable_reduce()->set_input(2);
  reduce.mutable_reduce()->set_result(3);
  plan::RefType rt;
  rt.set_ref(3);
  *rt.mutable_meta() = meta;
  ASSERT_TRUE(s.raw(reduce.SerializeAsString(), {rt}).ok());
  plan::MeshOrigin origin;
  origin.set_mesh(1);
  origin.mutable_flatten()->set_name("all");
  s.meshOrigin(origin);
  EXPECT_TRUE(s.flush().isOk());
  auto traced = s.traced("main");
  EXPECT_EQ(traced.magic(), 0x4D4F4E54u);
  EXPECT_EQ(traced.entry(), "main");
  EXPECT_EQ(traced.program().root(0).name(), "gpu");
  ASSERT_EQ(traced.program().instructions_size(), 2);
  EXPECT_TRUE(traced.program().instructions(0).has_call_op());
  EXPECT_TRUE(traced.program().instructions(1).has_reduce());
  ASSERT_EQ(traced.refs_size(), 2);
  EXPECT_EQ(traced.refs(0).ref(), 2);
  EXPECT_EQ(traced.refs(1).ref(), 3);
  EXPECT_EQ(traced.mesh_origins(0).flatten().name(), "all");
}

TEST(InstructionStream, ClosedStreamsRefuse) {
  Sink sink;
  InstructionStream s(sink.fn());
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(s.op(*t, 0, 0, s.location(""), {1, 1}, {2}).ok());
  ASSERT_TRUE(s.close().isOk()); // flushes first
  EXPECT_EQ(sink.all().size(), 1u);
  EXPECT_EQ(s.op(*t, 0, 0, 0, {1, 1}, {3}).status().code(), ErrorCode::Closed);
}

// A compiled step: the body's ops become a DefineRecording whose formals are
// the refs from before it; later calls are one CallRecording each.
TEST(InstructionStream, BodiesBecomeRecordingsWithFormals) {
  Sink sink;
  InstructionStream s(sink.fn(), noTimer());
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  int64_t loc = s.location("step.py:1");
  ASSERT_TRUE(s.op(*t, 0, 0, loc, {1, 1}, {2}).ok()); // before the body
  s.beginBody(10);
  EXPECT_EQ(s.bodyDepth(), 1);
  ASSERT_TRUE(s.op(*t, 0, 0, loc, {2, 3}, {10}).ok());  // reads 2 and 3
  ASSERT_TRUE(s.op(*t, 0, 0, loc, {10, 2}, {11}).ok()); // 10 is its own
  s.deleteRef(10, 0, 0);                                // local: never sent
  auto ended = s.endBody(7, {11}, 12, std::nullopt);
  ASSERT_TRUE(ended.ok()) << ended.status().toString();
  EXPECT_EQ(s.bodyDepth(), 0);
  EXPECT_EQ(ended->formals, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(ended->defined);
  EXPECT_TRUE(ended->orphans.empty());
  auto call = s.callRecording(7, {2, 3}, {20});
  ASSERT_TRUE(call.ok());
  s.deleteRef(11, 0, 0); // a result: bound outside, deleted like any ref
  ASSERT_TRUE(s.flush().isOk());
  auto all = sink.all();
  ASSERT_EQ(all.size(), 4u); // op, define, call, delete of 11
  EXPECT_TRUE(all[0].has_call_op());
  ASSERT_TRUE(all[1].has_define_recording());
  const auto &rec = all[1].define_recording().recording();
  EXPECT_EQ(rec.id(), 7);
  ASSERT_EQ(rec.body_size(), 2);
  EXPECT_EQ(rec.formals_size(), 2);
  ASSERT_EQ(rec.results_size(), 1);
  EXPECT_EQ(rec.results(0), 11);
  ASSERT_TRUE(all[2].has_call_recording());
  EXPECT_EQ(all[2].call_recording().actuals(1), 3);
  EXPECT_EQ(all[2].call_recording().results(0), 20);
  ASSERT_TRUE(all[3].has_delete_refs());
  ASSERT_EQ(all[3].delete_refs().refs_size(), 1);
  EXPECT_EQ(all[3].delete_refs().refs(0), 11);
}

// Deleting a ref from before the body waits for its end: a formal becomes
// the caller's (an orphan), any other ref is deleted then.
TEST(InstructionStream, DeletesDuringABodyWaitForItsEnd) {
  Sink sink;
  InstructionStream s(sink.fn(), noTimer());
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  int64_t loc = s.location("");
  s.beginBody(10);
  ASSERT_TRUE(s.op(*t, 0, 0, loc, {1, 1}, {10}).ok());
  s.deleteRef(1, 0, 0); // read by the body
  s.deleteRef(2, 0, 0); // not read
  ASSERT_TRUE(s.flush().isOk());
  EXPECT_TRUE(sink.all().empty()); // nothing of the body left
  auto ended = s.endBody(1, {10}, 11, std::nullopt);
  ASSERT_TRUE(ended.ok());
  ASSERT_EQ(ended->orphans.size(), 1u);
  EXPECT_EQ(ended->orphans[0].ref, 1);
  ASSERT_TRUE(s.flush().isOk());
  auto all = sink.all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].has_define_recording());
  ASSERT_TRUE(all[1].has_delete_refs());
  ASSERT_EQ(all[1].delete_refs().refs_size(), 1);
  EXPECT_EQ(all[1].delete_refs().refs(0), 2);
}

// Two traces of the same program have one canonical form, so the second
// defines nothing; a different program defines anew.
TEST(InstructionStream, EqualBodiesAreDefinedOnce) {
  Sink sink;
  InstructionStream s(sink.fn(), noTimer());
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  int64_t loc = s.location("step.py:4");
  auto trace = [&](int64_t first, int64_t input, int ops,
                   const std::optional<std::string> &previous) {
    s.beginBody(first);
    int64_t last = input;
    for (int k = 0; k < ops; ++k) {
      EXPECT_TRUE(s.op(*t, 0, 0, loc, {last, last}, {first + k}).ok());
      last = first + k;
    }
    auto e = s.endBody(first, {last}, first + ops, previous);
    EXPECT_TRUE(e.ok());
    return *e;
  };
  auto a = trace(100, 1, 3, std::nullopt);
  auto b = trace(200, 5, 3, a.canonical); // other refs, same program
  auto c = trace(300, 5, 4, a.canonical);
  EXPECT_TRUE(a.defined);
  EXPECT_EQ(a.canonical, b.canonical);
  EXPECT_FALSE(b.defined);
  EXPECT_EQ(b.formals, (std::vector<int64_t>{5}));
  EXPECT_NE(c.canonical, a.canonical);
  EXPECT_TRUE(c.defined);
  ASSERT_TRUE(s.flush().isOk());
  int defines = 0;
  for (const auto &i : sink.all())
    defines += i.has_define_recording();
  EXPECT_EQ(defines, 2);
}

TEST(InstructionStream, BodyErrorsAndAborts) {
  Sink sink;
  InstructionStream s(sink.fn(), noTimer());
  auto t = s.defineOp(addTemplate(), {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(s.endBody(1, {}, 1, std::nullopt).status().code(),
            ErrorCode::Invalid); // no body
  s.beginBody(10);
  ASSERT_TRUE(s.op(*t, 0, 0, s.location(""), {1, 1}, {10}).ok());
  EXPECT_EQ(s.endBody(1, {3}, 11, std::nullopt).status().code(),
            ErrorCode::Invalid); // 3 is not the body's
  s.beginBody(20);
  ASSERT_TRUE(s.op(*t, 0, 0, s.location(""), {1, 1}, {20}).ok());
  s.deleteRef(1, 0, 0);
  s.abortBody(21);
  EXPECT_EQ(s.bodyDepth(), 0);
  s.deleteRef(20, 0, 0); // never existed anywhere: not sent
  ASSERT_TRUE(s.flush().isOk());
  auto all = sink.all();
  ASSERT_EQ(all.size(), 1u); // the deferred delete of 1 went out
  ASSERT_TRUE(all[0].has_delete_refs());
  EXPECT_EQ(all[0].delete_refs().refs(0), 1);
}

} // namespace
