//===- OutlineStretchesTest.cpp - A recording's runs of ATen calls --------===//
//
// findStretches() and outlineStretches() (runtime/tensor/lib/
// OutlineStretches.h) on recording bodies: where stretches start and end,
// their formals, results and deferred deletions, and the body that calls
// them. Torch-free; ExecutorTest's OutlinedStretches tests run the result.
//
//===----------------------------------------------------------------------===//

#include "../../../runtime/tensor/lib/OutlineStretches.h"

#include <gtest/gtest.h>

#include <vector>

using namespace monarch::tensor;
namespace plan = monarch::plan;
using namespace monarch::tensor::detail;
using Refs = std::vector<int64_t>;

namespace {

constexpr int64_t kMesh = 1, kOther = 2, kStream = 0, kComm = 3;

class Body {
public:
  Body() { rec.set_id(7); }

  /// An ATen call reading `args`, defining `results`.
  Body &op(Refs args, Refs results, int64_t mesh = kMesh,
           int64_t stream = kStream) {
    plan::Instruction &i = next(mesh, stream);
    plan::CallOp *c = i.mutable_call_op();
    c->set_name("aten::add");
    c->set_overload("Tensor");
    for (int64_t a : args)
      c->add_args()->set_ref(a);
    for (int64_t r : results)
      c->add_results(r);
    return *this;
  }
  Body &del(Refs refs, int64_t mesh = kMesh, int64_t stream = kStream) {
    plan::Instruction &i = next(mesh, stream);
    for (int64_t r : refs)
      i.mutable_delete_refs()->add_refs(r);
    return *this;
  }
  /// What a stretch cannot hold: a send of `input`.
  Body &send(int64_t input, int64_t result) {
    plan::Instruction &i = next(kMesh, kStream);
    i.mutable_send_tensor()->set_input(input);
    i.mutable_send_tensor()->set_result(result);
    return *this;
  }

  plan::Recording rec;

private:
  plan::Instruction &next(int64_t mesh, int64_t stream) {
    plan::Instruction *i = rec.add_body();
    i->set_id(100 + rec.body_size());
    i->set_mesh(mesh);
    i->set_stream(stream);
    return *i;
  }
};

bool otherMeshInert(const plan::Instruction &inst) {
  return inst.mesh() == kOther;
}

Refs list(const google::protobuf::RepeatedField<int64_t> &f) {
  return Refs(f.begin(), f.end());
}

} // namespace

TEST(OutlineStretches, RunsBetweenTransfersBecomeStretchesWithTheirRefs) {
  Body b;
  b.rec.add_formals(1);
  b.op({1}, {2}).op({2, 1}, {3}).op({3}, {4}) // stretch 0: 0..3
      .send(4, 5)
      .op({5}, {6}).op({6, 3}, {7});          // stretch 1: 4..6
  std::vector<Stretch> s = findStretches(b.rec, 2, otherMeshInert);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].begin, 0u);
  EXPECT_EQ(s[0].end, 3u);
  EXPECT_EQ(s[0].ops, 3u);
  EXPECT_EQ(list(s[0].recording.formals()), Refs({1}));
  EXPECT_EQ(list(s[0].recording.results()), Refs({2, 3, 4}));
  EXPECT_EQ(s[1].begin, 4u);
  EXPECT_EQ(s[1].end, 6u);
  EXPECT_EQ(list(s[1].recording.formals()), Refs({5, 3}));
  EXPECT_EQ(list(s[1].recording.results()), Refs({6, 7}));

  plan::Recording out = outlineStretches(b.rec, s);
  ASSERT_EQ(out.body_size(), 3);
  EXPECT_EQ(out.id(), 7);
  EXPECT_EQ(list(out.formals()), Refs({1}));
  const plan::CallRecording &c0 = out.body(0).call_recording();
  EXPECT_EQ(c0.recording(), 7);
  EXPECT_EQ(c0.stretch(), 1u);
  EXPECT_EQ(list(c0.actuals()), Refs({1}));
  EXPECT_EQ(list(c0.results()), Refs({2, 3, 4}));
  EXPECT_EQ(out.body(0).id(), 101); // its first instruction's
  EXPECT_TRUE(out.body(1).has_send_tensor());
  EXPECT_EQ(out.body(2).call_recording().stretch(), 2u);
}

TEST(OutlineStretches, ShortRunsAndOtherQueuesAreNotStretches) {
  Body b;
  b.op({1}, {2})
      .send(2, 3)
      .op({3}, {4}).op({4}, {5}, kMesh, kComm) // another stream: two runs of 1
      .op({5}, {6}, kMesh, kComm);
  std::vector<Stretch> s = findStretches(b.rec, 2, otherMeshInert);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].begin, 3u);
  EXPECT_EQ(s[0].stream, kComm);
  EXPECT_TRUE(findStretches(b.rec, 3, otherMeshInert).empty());
}

TEST(OutlineStretches, InstructionsOfMeshesWithoutThisRankAreLeftOut) {
  Body b;
  b.op({1}, {2}).op({9}, {10}, kOther).del({9}, kOther).op({2}, {3});
  std::vector<Stretch> s = findStretches(b.rec, 2, otherMeshInert);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].end, 4u);
  ASSERT_EQ(s[0].recording.body_size(), 2);
  EXPECT_EQ(list(s[0].recording.results()), Refs({2, 3}));
  plan::Recording out = outlineStretches(b.rec, s);
  EXPECT_EQ(out.body_size(), 1); // the other mesh's do nothing here
}

TEST(OutlineStretches, DeletionsStayInsideOrAreDeferredAfterTheCall) {
  Body b;
  b.rec.add_formals(1);
  b.op({1}, {2}).op({2}, {3}).del({2, 1}).op({3}, {4});
  std::vector<Stretch> s = findStretches(b.rec, 2, otherMeshInert);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(s[0].recording.body_size(), 4);
  EXPECT_EQ(list(s[0].recording.body(2).delete_refs().refs()), Refs({2}));
  EXPECT_EQ(list(s[0].recording.results()), Refs({3, 4})); // 2 is freed inside
  ASSERT_EQ(s[0].deferred.size(), 1u);
  EXPECT_EQ(list(s[0].deferred[0].delete_refs().refs()), Refs({1}));
  plan::Recording out = outlineStretches(b.rec, s);
  ASSERT_EQ(out.body_size(), 2);
  EXPECT_TRUE(out.body(0).has_call_recording());
  EXPECT_EQ(list(out.body(1).delete_refs().refs()), Refs({1}));
  EXPECT_EQ(out.body(1).id(), b.rec.body(2).id());
}

TEST(OutlineStretches, AUseAfterADeletionEndsTheStretchBeforeIt) {
  // The expansion must still report the use of a deleted ref.
  Body b;
  b.rec.add_formals(1);
  b.op({1}, {2}).op({2}, {3}).del({1}).op({1}, {4}).op({4}, {5});
  std::vector<Stretch> s = findStretches(b.rec, 2, otherMeshInert);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].end, 3u);
  EXPECT_EQ(s[1].begin, 3u);
  EXPECT_EQ(list(s[1].recording.formals()), Refs({1}));
}

TEST(OutlineStretches, OnlyAnInPlaceSelfRebindsARefFromBefore) {
  Body b;
  b.rec.add_formals(1);
  b.op({1}, {2})
      .op({1, 2}, {1}) // x.copy_(y) returning x: stays in
      .op({2}, {3})
      .op({3}, {1}) // binds the caller's 1 anew: ends the stretch
      .op({1}, {4});
  std::vector<Stretch> s = findStretches(b.rec, 2, otherMeshInert);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].end, 3u);
  EXPECT_EQ(list(s[0].recording.formals()), Refs({1}));
  EXPECT_EQ(list(s[0].recording.results()), Refs({2, 3}));
  EXPECT_EQ(s[1].begin, 3u);
  EXPECT_EQ(list(s[1].recording.results()), Refs({1, 4}));
}
