//===- Collective.cpp - reduce and to_mesh on one rank --------------------===//
//
// DESIGN.md §6.2 (reduce) and §6.3 (to_mesh). Every member of a collective
// takes part even when its input is an error or has the wrong shape (it
// contributes zeros of the planned shape), so no peer hangs; the checks that
// decide whether a collective runs at all depend only on the plan and are
// the same on every rank.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <set>
#include <sstream>

namespace monarch::tensor::detail {

namespace {

std::string join(const std::vector<int64_t> &xs, const char *sep = ",") {
  std::ostringstream os;
  for (size_t i = 0; i < xs.size(); ++i)
    os << (i ? sep : "") << xs[i];
  return os.str();
}

std::string shapeString(c10::IntArrayRef shape) {
  return "[" + join(shape.vec(), ", ") + "]";
}

Buffer bufferOf(const at::Tensor &t) {
  return Buffer{t.data_ptr(), static_cast<size_t>(t.numel()),
                toDType(t.scalar_type())};
}

ReduceKind kindOf(plan::ReduceOp op) {
  switch (op) {
  case plan::PRODUCT:
    return ReduceKind::Product;
  case plan::MIN:
    return ReduceKind::Min;
  case plan::MAX:
    return ReduceKind::Max;
  default:
    return ReduceKind::Sum;
  }
}

std::vector<std::string> dimsOf(const plan::Reduce &r) {
  return {r.dims().begin(), r.dims().end()};
}

/// The value an input ref contributes: its tensor, or zeros of the planned
/// type with the error that replaced it.
struct Contribution {
  at::Tensor tensor;
  ErrorPtr error;
};

Contribution contribution(const CollectiveEnv &env, int64_t ref,
                          const plan::TensorMeta &meta, const char *what) {
  std::vector<int64_t> shape(meta.shape().begin(), meta.shape().end());
  at::ScalarType type = toScalarType(meta.dtype());
  Contribution c;
  try {
    RefValue v = env.inputError ? RefValue{at::Tensor(), env.inputError}
                                : env.table->get(ref);
    if (v.error)
      c.error = v.error;
    else if (v.tensor.scalar_type() != type || v.tensor.sizes() != shape)
      c.error = env.fail(std::string(what) + " input has dtype " +
                         c10::toString(v.tensor.scalar_type()) + " and shape " +
                         shapeString(v.tensor.sizes()) + " but the plan says " +
                         c10::toString(type) + " " + shapeString(shape) +
                         "; it took part with zeros");
    else if (!v.tensor.device().is_cpu())
      c.error = env.fail(std::string(what) + " input is on " +
                         v.tensor.device().str() +
                         "; the Gloo backend needs CPU tensors");
    else
      c.tensor = v.tensor.contiguous();
  } catch (const std::exception &e) {
    c.error = env.fail(e.what());
  }
  if (c.error)
    c.tensor = at::zeros(shape, at::TensorOptions().dtype(type));
  return c;
}

void bindError(const RefCells &table, const std::vector<int64_t> &refs,
               const ErrorPtr &error) {
  for (int64_t r : refs)
    table.set(r, RefValue{at::Tensor(), error});
}

} // namespace

Expected<std::shared_ptr<Communicator>>
CommunicatorCache::get(CollectiveBackend &backend, const std::string &key,
                       const std::vector<int64_t> &ranks, int64_t self) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = comms.find(key); it != comms.end())
      return it->second;
  }
  // Connect without the lock: keys hold the stream, so a key is only ever
  // created by that stream's thread, and other streams must not wait on a
  // rendezvous that may need their own progress.
  auto comm = backend.connect(key, ranks, self);
  if (!comm.ok())
    return comm;
  std::lock_guard<std::mutex> lock(mutex);
  comms.emplace(key, comm.value());
  return comm;
}

uint64_t CommunicatorCache::nextTag(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex);
  return tags[key]++;
}

std::string checkReduce(const plan::Reduce &r, const mesh::MeshView &view) {
  auto dims = dimsOf(r);
  auto groups = view.groups(dims);
  if (!groups.ok())
    return groups.error().message;
  size_t ndims = dims.empty() ? view.ndim() : dims.size();
  bool stack = r.op() == plan::STACK;
  if ((stack || r.scatter()) && ndims > 1)
    return "reduce with stack or scatter takes exactly one dim, got " +
           std::to_string(ndims);
  if (r.in_place() && r.scatter())
    return "in-place reduce is only supported without scatter";
  if (r.in_place() && stack)
    return "in-place stack is not supported: the result has a new leading "
           "dim";
  if (r.in_place() && r.has_out())
    return "in-place reduce cannot also write to out=";
  int64_t n =
      groups->empty() ? 1 : static_cast<int64_t>(groups->front().size());
  if (r.scatter()) {
    if (r.input_meta().shape_size() == 0)
      return "scatter needs a tensor with at least one dim";
    int64_t lead = r.input_meta().shape(0);
    if (!stack && lead != n)
      return "reduce with scatter needs shape[0] == " + std::to_string(n) +
             " (the size of the reduced dims), got " + std::to_string(lead);
    if (stack && lead % n != 0)
      return "stack with scatter needs shape[0] divisible by " +
             std::to_string(n) + ", got " + std::to_string(lead);
  }
  return "";
}

std::string checkSend(const mesh::MeshView &source,
                      const mesh::MeshView &dest) {
  for (const auto &d : source.dims()) {
    auto idx = dest.find(d.name);
    if (!idx)
      return "to_mesh: source dim '" + d.name +
             "' does not exist in the destination mesh " + dest.shapeString();
    if (dest.dims()[*idx].size != d.size)
      return "to_mesh: dim '" + d.name + "' has size " +
             std::to_string(d.size) + " in the source but " +
             std::to_string(dest.dims()[*idx].size) + " in the destination";
  }
  return "";
}

void runReduce(const CollectiveEnv &env, const plan::Reduce &r,
               const mesh::MeshView &view) {
  std::vector<int64_t> targets;
  if (r.in_place())
    targets.push_back(r.input());
  else
    targets.push_back(r.result());
  if (r.has_out())
    targets.push_back(r.out());

  auto group = view.groupOf(env.rank, dimsOf(r));
  if (!group.ok()) {
    bindError(*env.table, targets, env.fail(group.error().message));
    return;
  }
  const std::vector<int64_t> &ranks = group.value();
  int64_t n = static_cast<int64_t>(ranks.size());
  if (!env.backend) {
    bindError(*env.table, targets,
              env.fail("no collective backend attached to this worker"));
    return;
  }
  std::string key = "s" + std::to_string(env.stream) + "/" + join(ranks);
  auto comm = env.cache->get(*env.backend, key, ranks, env.rank);
  if (!comm.ok()) {
    bindError(*env.table, targets, env.fail(comm.status().message()));
    return;
  }
  Communicator &c = *comm.value();

  Contribution in = contribution(env, r.input(), r.input_meta(), "reduce");
  ErrorPtr error = in.error;
  const at::Tensor &input = in.tensor;
  std::vector<int64_t> shape(r.input_meta().shape().begin(),
                             r.input_meta().shape().end());
  at::TensorOptions options = input.options();
  ReduceKind kind = kindOf(r.op());
  at::Tensor result;
  Status status = Status();

  if (r.op() != plan::STACK && !r.scatter()) {
    result = r.in_place() ? input : input.clone();
    status = c.allreduce(bufferOf(result), kind);
  } else if (r.op() != plan::STACK) {
    result = at::empty(std::vector<int64_t>(shape.begin() + 1, shape.end()),
                       options);
    status = c.reduceScatter(bufferOf(input), bufferOf(result), kind);
  } else if (!r.scatter()) {
    std::vector<int64_t> stacked{n};
    stacked.insert(stacked.end(), shape.begin(), shape.end());
    result = at::empty(stacked, options);
    status = c.allgather(bufferOf(input), bufferOf(result));
  } else {
    result = at::empty(shape, options);
    status = c.alltoall(bufferOf(input), bufferOf(result));
  }
  if (!status.isOk() && !error)
    error = env.fail(status.message());
  if (error) {
    bindError(*env.table, targets, error);
    return;
  }

  try {
    if (r.op() == plan::AVG) {
      if (at::isFloatingType(result.scalar_type()) ||
          at::isComplexType(result.scalar_type()))
        result.div_(n);
      else
        result.div_(c10::Scalar(n), "trunc");
    }
    if (r.in_place()) {
      RefValue original = env.table->get(r.input());
      if (!original.tensor.is_same(result))
        original.tensor.copy_(result);
      return; // the input ref still names the (now reduced) tensor
    }
    if (r.has_out()) {
      RefValue out = env.table->get(r.out());
      if (out.error) {
        bindError(*env.table, targets, out.error);
        return;
      }
      if (out.tensor.sizes() != result.sizes() ||
          out.tensor.scalar_type() != result.scalar_type()) {
        bindError(
            *env.table, targets,
            env.fail("out= has dtype " +
                     std::string(c10::toString(out.tensor.scalar_type())) +
                     " and shape " + shapeString(out.tensor.sizes()) +
                     " but the reduce produces " +
                     c10::toString(result.scalar_type()) + " " +
                     shapeString(result.sizes())));
        return;
      }
      out.tensor.copy_(result);
      result = out.tensor;
    }
    env.table->set(r.result(), RefValue{result, nullptr});
  } catch (const std::exception &e) {
    bindError(*env.table, targets, env.fail(e.what()));
  }
}

void runSend(const CollectiveEnv &env, const plan::SendTensor &s,
             const mesh::MeshView &source, const mesh::MeshView &dest) {
  // Source rank of every destination rank (broadcast over dest-only dims).
  std::vector<std::pair<int64_t, int64_t>> pairs; // (source, dest)
  for (int64_t d : dest.ranks()) {
    std::vector<int64_t> coords = *dest.coordsOf(d);
    std::vector<int64_t> from;
    for (const auto &dim : source.dims())
      from.push_back(coords[*dest.find(dim.name)]);
    pairs.emplace_back(source.rankAt(from).value(), d);
  }
  std::set<int64_t> members;
  for (int64_t r : source.ranks())
    members.insert(r);
  for (int64_t r : dest.ranks())
    members.insert(r);
  std::vector<int64_t> ranks(members.begin(), members.end());
  auto indexOf = [&](int64_t rank) {
    return static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank) -
                            ranks.begin());
  };
  bool crossProcess = std::any_of(pairs.begin(), pairs.end(),
                                  [](auto &p) { return p.first != p.second; });
  bool amSource = source.contains(env.rank);
  bool amDest = dest.contains(env.rank);

  Contribution in;
  if (amSource)
    in = contribution(env, s.input(), s.meta(), "to_mesh");

  std::shared_ptr<Communicator> comm;
  std::string key = "p" + std::to_string(env.stream) + "/" + join(ranks);
  if (crossProcess) {
    if (!env.backend) {
      ErrorPtr e = env.fail("no collective backend attached to this worker");
      if (amDest)
        bindError(*env.table, {s.result()}, e);
      return;
    }
    auto c = env.cache->get(*env.backend, key, ranks, env.rank);
    if (!c.ok()) {
      ErrorPtr e = env.fail(c.status().message());
      if (amDest)
        bindError(*env.table, {s.result()}, e);
      return;
    }
    comm = c.value();
  }

  std::vector<int64_t> shape(s.meta().shape().begin(), s.meta().shape().end());
  at::TensorOptions options =
      at::TensorOptions().dtype(toScalarType(s.meta().dtype()));
  // Header: {errored, root instruction} so receivers learn of an error.
  at::Tensor header = at::zeros({2}, at::TensorOptions().dtype(at::kLong));
  if (in.error) {
    header.data_ptr<int64_t>()[0] = 1;
    header.data_ptr<int64_t>()[1] = in.error->instruction;
  }

  std::vector<PeerBuffer> sends, recvs;
  at::Tensor received, receivedHeader;
  int64_t from = -1;
  for (const auto &[src, dst] : pairs) {
    if (src == env.rank && dst == env.rank) {
      // Same process: still a copy (later in-place changes must not show).
      env.table->set(s.result(), in.error
                                     ? RefValue{at::Tensor(), in.error}
                                     : RefValue{in.tensor.clone(), nullptr});
    } else if (src == env.rank) {
      sends.push_back({bufferOf(in.tensor), indexOf(dst)});
    } else if (dst == env.rank) {
      from = src;
      received = at::empty(shape, options);
      receivedHeader = at::empty({2}, at::TensorOptions().dtype(at::kLong));
    }
  }
  if (!crossProcess || (sends.empty() && from < 0)) {
    if (crossProcess) // a member with nothing to move still counts the tag
      env.cache->nextTag(key);
    return;
  }
  uint64_t tag = env.cache->nextTag(key) * 2;
  std::vector<PeerBuffer> headerSends;
  for (const auto &p : sends)
    headerSends.push_back({bufferOf(header), p.peer});
  std::vector<PeerBuffer> headerRecvs, dataRecvs;
  if (from >= 0) {
    headerRecvs.push_back({bufferOf(receivedHeader), indexOf(from)});
    dataRecvs.push_back({bufferOf(received), indexOf(from)});
  }
  Status st = comm->sendRecv(headerSends, headerRecvs, tag);
  if (st.isOk())
    st = comm->sendRecv(sends, dataRecvs, tag + 1);
  if (!st.isOk()) {
    ErrorPtr e = env.fail(st.message());
    if (from >= 0)
      bindError(*env.table, {s.result()}, e);
    return;
  }
  if (from < 0)
    return;
  auto *h = receivedHeader.data_ptr<int64_t>();
  if (h[0] != 0) {
    auto e = std::make_shared<ErrorRecord>();
    e->instruction = h[1];
    e->rank = from;
    e->message = "the input of to_mesh was an error on rank " +
                 std::to_string(from) + " (root failure: instruction " +
                 std::to_string(h[1]) + ")";
    bindError(*env.table, {s.result()}, e);
  } else {
    env.table->set(s.result(), RefValue{received, nullptr});
  }
}

} // namespace monarch::tensor::detail
