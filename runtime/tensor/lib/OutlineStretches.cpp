//===- OutlineStretches.cpp - A recording's runs of ATen calls, outlined --===//

#include "OutlineStretches.h"

#include "monarch/tensor/Plan.h"

#include <algorithm>
#include <unordered_set>

namespace monarch::tensor::detail {

namespace {

/// The stretch being grown: its refs so far and what it holds.
class Grower {
public:
  Grower(size_t begin, const plan::Instruction &first) {
    s.begin = s.end = begin;
    s.mesh = first.mesh();
    s.stream = first.stream();
  }

  bool sameQueue(const plan::Instruction &inst) const {
    return inst.mesh() == s.mesh && inst.stream() == s.stream;
  }

  /// Takes the ATen call `inst`, or false (and nothing changes) when the
  /// stretch must end before it.
  bool takeCall(const plan::Instruction &inst) {
    std::vector<int64_t> reads, defines;
    visitRefs(inst, [&](int64_t r, RefRole role) {
      (role == RefRole::Define ? defines : reads).push_back(r);
    });
    for (int64_t r : reads)
      if (deleted.count(r))
        return false;
    for (int64_t r : defines) {
      if (deleted.count(r))
        return false;
      bool outer = formalSet.count(r) || (!defined.count(r) && seen.count(r));
      bool self = std::find(reads.begin(), reads.end(), r) != reads.end();
      if (outer && !self)
        return false;
    }
    for (int64_t r : reads) {
      seen.insert(r);
      if (!defined.count(r) && formalSet.insert(r).second)
        s.recording.add_formals(r);
    }
    for (int64_t r : defines) {
      seen.insert(r);
      if (!formalSet.count(r) && defined.insert(r).second)
        order.push_back(r);
    }
    *s.recording.add_body() = inst;
    ++s.ops;
    return true;
  }

  /// Takes the deletion `inst` (on the stretch's mesh and stream).
  void takeDelete(const plan::Instruction &inst) {
    plan::Instruction inner = inst, later = inst;
    inner.mutable_delete_refs()->clear_refs();
    later.mutable_delete_refs()->clear_refs();
    for (int64_t r : inst.delete_refs().refs()) {
      if (defined.erase(r))
        inner.mutable_delete_refs()->add_refs(r);
      else
        later.mutable_delete_refs()->add_refs(r);
      deleted.insert(r);
    }
    if (inner.delete_refs().refs_size() > 0)
      *s.recording.add_body() = std::move(inner);
    if (later.delete_refs().refs_size() > 0)
      s.deferred.push_back(std::move(later));
  }

  Stretch finish(size_t end) {
    s.end = end;
    for (int64_t r : order)
      if (defined.count(r))
        s.recording.add_results(r);
    return std::move(s);
  }

private:
  Stretch s;
  std::unordered_set<int64_t> formalSet; ///< refs from before it
  std::unordered_set<int64_t> defined;   ///< refs it bound and holds
  std::unordered_set<int64_t> deleted;   ///< refs its deletions named
  std::unordered_set<int64_t> seen;      ///< every ref it named
  std::vector<int64_t> order;            ///< `defined`, first binding first
};

} // namespace

std::vector<Stretch>
findStretches(const plan::Recording &rec, size_t minOps,
              const std::function<bool(const plan::Instruction &)> &inert) {
  std::vector<Stretch> out;
  const int n = rec.body_size();
  auto skippable = [&](const plan::Instruction &inst) {
    return (inst.has_call_op() || inst.has_delete_refs()) && inert(inst);
  };
  int i = 0;
  while (i < n) {
    const plan::Instruction &first = rec.body(i);
    if (!first.has_call_op() || skippable(first)) {
      ++i;
      continue;
    }
    Grower grow(i, first);
    int j = i, end = i;
    while (j < n) {
      const plan::Instruction &inst = rec.body(j);
      if (skippable(inst)) {
        ++j;
        continue;
      }
      if (!grow.sameQueue(inst))
        break;
      if (inst.has_call_op()) {
        if (!grow.takeCall(inst))
          break;
      } else if (inst.has_delete_refs()) {
        grow.takeDelete(inst);
      } else {
        break;
      }
      end = ++j;
    }
    Stretch s = grow.finish(static_cast<size_t>(end));
    if (s.ops >= std::max<size_t>(minOps, 1))
      out.push_back(std::move(s));
    i = end; // the instruction that ended it may start the next
  }
  return out;
}

plan::Recording outlineStretches(const plan::Recording &rec,
                                 const std::vector<Stretch> &stretches) {
  plan::Recording out = rec;
  out.clear_body();
  size_t next = 0;
  for (int k = 0; k < rec.body_size();) {
    if (next < stretches.size() &&
        static_cast<size_t>(k) == stretches[next].begin) {
      const Stretch &s = stretches[next];
      plan::Instruction *call = out.add_body();
      call->set_id(rec.body(k).id());
      call->set_mesh(s.mesh);
      call->set_stream(s.stream);
      plan::CallRecording *c = call->mutable_call_recording();
      c->set_recording(rec.id());
      c->set_stretch(static_cast<uint32_t>(next + 1));
      *c->mutable_actuals() = s.recording.formals();
      *c->mutable_results() = s.recording.results();
      for (const plan::Instruction &d : s.deferred)
        *out.add_body() = d;
      k = static_cast<int>(s.end);
      ++next;
      continue;
    }
    *out.add_body() = rec.body(k);
    ++k;
  }
  return out;
}

} // namespace monarch::tensor::detail
