//===- Collectives.h - Collective backends and stores ----------*- C++ -*-===//
//
// One interface for every collective the tensor engine issues (DESIGN.md §5):
// Gloo implements it for CPU tensors, NCCL for CUDA tensors. The interface is
// torch-free: it moves typed, contiguous buffers. Which ranks form a
// communicator (MeshView::groupOf) and caching per (stream, mesh dims) are
// the executor's job; a backend only builds a communicator for a rank list.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_COLLECTIVES_H
#define MONARCH_TENSOR_COLLECTIVES_H

#include "monarch/tensor/Status.h"
#include "monarch/tensor/plan.pb.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace monarch::tensor {

/// Key/value rendezvous store. Gloo exchanges connection addresses through
/// it; a worker will later back it with actor messages to the controller.
class Store {
public:
  virtual ~Store() = default;
  virtual Status set(const std::string &key,
                     const std::vector<char> &value) = 0;
  /// Waits up to `timeout` for `key` to be set.
  virtual Expected<std::vector<char>>
  get(const std::string &key, std::chrono::milliseconds timeout) = 0;
};

/// Every member's `mine`, by member index: member `index` sets `prefix` +
/// its index and reads every member's, waiting up to `timeout` for each.
/// The rendezvous by which members choose alike: all read the same values.
inline Expected<std::vector<std::string>>
gatherThroughStore(Store &store, const std::string &prefix, int index,
                   size_t members, const std::string &mine,
                   std::chrono::milliseconds timeout) {
  if (Status s = store.set(prefix + std::to_string(index),
                           std::vector<char>(mine.begin(), mine.end()));
      !s.isOk())
    return s;
  std::vector<std::string> all;
  for (size_t i = 0; i < members; ++i) {
    auto v = store.get(prefix + std::to_string(i), timeout);
    if (!v.ok())
      return v.status();
    all.emplace_back(v.value().begin(), v.value().end());
  }
  return all;
}

/// A store in a directory shared by all ranks (one file per key, written
/// atomically by rename). Good for processes of one host and for tests.
class FileStore : public Store {
public:
  explicit FileStore(std::string directory);
  Status set(const std::string &key, const std::vector<char> &value) override;
  Expected<std::vector<char>> get(const std::string &key,
                                  std::chrono::milliseconds timeout) override;

private:
  std::string pathOf(const std::string &key) const;
  std::string dir;
};

/// Ranks whose processes are known to have failed (the controller tells the
/// live workers). A collective with a failed member fails at once on every
/// live member instead of waiting out the timeout, and a rendezvous waiting
/// for one gives up. Thread-safe.
class PeerHealth {
public:
  void markFailed(int64_t rank, std::string reason);
  /// The first failed rank among `ranks` and why, if any.
  std::optional<std::pair<int64_t, std::string>>
  firstFailed(const std::vector<int64_t> &ranks) const;
  bool anyFailed() const { return failures.load() > 0; }

private:
  mutable std::mutex mu;
  std::map<int64_t, std::string> failed;
  std::atomic<int> failures{0};
};

/// A contiguous buffer of `count` elements of `dtype` in host memory (Gloo)
/// or device memory (NCCL).
struct Buffer {
  void *data = nullptr;
  size_t count = 0;
  plan::DType dtype = plan::FLOAT32;
};

size_t elementSize(plan::DType dtype);

enum class ReduceKind { Sum, Product, Min, Max };

/// One side of a point-to-point transfer.
struct PeerBuffer {
  Buffer buffer;
  int peer;
};

/// A group of ranks that run collectives together. Calls are blocking and
/// must be issued in the same order on every member; each member uses a
/// communicator from one thread at a time (one stream).
class Communicator {
public:
  virtual ~Communicator() = default;
  /// This process's index in the group, and the group size.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual Status allreduce(Buffer inout, ReduceKind kind) = 0;
  /// `in` holds size()*n elements; `out` receives this rank's n-element
  /// block of the reduction.
  virtual Status reduceScatter(Buffer in, Buffer out, ReduceKind kind) = 0;
  /// `out` (size()*n) receives every rank's n-element `in`, in rank order.
  virtual Status allgather(Buffer in, Buffer out) = 0;
  /// `in` and `out` hold size() blocks; block j of `in` goes to rank j and
  /// arrives as block (this rank) of its `out`.
  virtual Status alltoall(Buffer in, Buffer out) = 0;
  virtual Status broadcast(Buffer inout, int root) = 0;
  /// Point-to-point: posts every receive, then every send, then waits for
  /// all of them, so exchanges in any direction cannot deadlock. `tag` must
  /// match between the two sides of each transfer.
  virtual Status sendRecv(const std::vector<PeerBuffer> &sends,
                          const std::vector<PeerBuffer> &recvs,
                          uint64_t tag) = 0;
  /// A member's process failed: make any call blocked in this communicator,
  /// on any thread, fail soon (best effort; the default does nothing and
  /// such calls end at their timeout). The communicator is unusable after.
  virtual void abort() {}
};

/// A communicator that forwards every call to `inner`: a decorator derives
/// from it and overrides only what it changes.
class ForwardingCommunicator : public Communicator {
public:
  explicit ForwardingCommunicator(std::shared_ptr<Communicator> inner)
      : inner(std::move(inner)) {}
  int rank() const override { return inner->rank(); }
  int size() const override { return inner->size(); }
  Status allreduce(Buffer b, ReduceKind kind) override {
    return inner->allreduce(b, kind);
  }
  Status reduceScatter(Buffer in, Buffer out, ReduceKind kind) override {
    return inner->reduceScatter(in, out, kind);
  }
  Status allgather(Buffer in, Buffer out) override {
    return inner->allgather(in, out);
  }
  Status alltoall(Buffer in, Buffer out) override {
    return inner->alltoall(in, out);
  }
  Status broadcast(Buffer b, int root) override {
    return inner->broadcast(b, root);
  }
  Status sendRecv(const std::vector<PeerBuffer> &sends,
                  const std::vector<PeerBuffer> &recvs,
                  uint64_t tag) override {
    return inner->sendRecv(sends, recvs, tag);
  }
  void abort() override { inner->abort(); }

protected:
  std::shared_ptr<Communicator> inner;
};

/// Where a communicator's device work is enqueued: a caller's CUDA stream
/// (a `cudaStream_t`, kept opaque so this header stays CUDA- and torch-free)
/// on `device`, or none (the backend's own stream). Backends without device
/// work ignore it.
struct DeviceQueue {
  void *cudaStream = nullptr;
  int device = -1;
};

class CollectiveBackend {
public:
  virtual ~CollectiveBackend() = default;
  virtual const char *name() const = 0;
  /// Builds (collectively: every member calls it with the same `key` and
  /// `ranks`) the communicator of `ranks`, global ranks in group order, for
  /// the calling process `self`.
  virtual Expected<std::shared_ptr<Communicator>>
  connect(const std::string &key, const std::vector<int64_t> &ranks,
          int64_t self) = 0;
  /// connect() for a communicator whose device work runs on `queue`: NCCL
  /// enqueues each collective on that CUDA stream, so it is ordered after
  /// the kernels that produced its buffers without a host synchronization,
  /// and later kernels on the stream see its result. Calls still block (the
  /// wait is bounded by the backend's timeout) so failures surface at the
  /// instruction. The stream must outlive the communicator.
  virtual Expected<std::shared_ptr<Communicator>>
  connectOn(const std::string &key, const std::vector<int64_t> &ranks,
            int64_t self, const DeviceQueue &queue) {
    (void)queue;
    return connect(key, ranks, self);
  }

protected:
  /// The position of `self` in `ranks`, or an error naming this backend and
  /// the communicator when `self` is not a member.
  Expected<int> memberIndex(const std::string &key,
                            const std::vector<int64_t> &ranks,
                            int64_t self) const {
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == self)
        return static_cast<int>(i);
    return Status(ErrorCode::Internal,
                  std::string(name()) + ": rank " + std::to_string(self) +
                      " is not a member of communicator " + key);
  }
};

struct GlooOptions {
  /// Interface address the TCP transport binds to (loopback by default,
  /// DESIGN.md §5 "Security").
  std::string hostname = "127.0.0.1";
  std::chrono::milliseconds timeout{60000};
  /// When set, a rendezvous gives up as soon as a member is known failed.
  std::shared_ptr<PeerHealth> health;
};

/// Gloo over TCP for CPU tensors, rendezvousing through `store`.
std::shared_ptr<CollectiveBackend> makeGlooBackend(std::shared_ptr<Store> store,
                                                   GlooOptions options = {});

/// `inner` (Gloo), with the small all-gathers (at most 64 bytes a member:
/// to_mesh's control step) of communicators whose members all run on this
/// host served through shared memory instead of sockets
/// (lib/collectives/HostLocal.cpp). Rendezvous keys `monarch/host-local/...`.
std::shared_ptr<CollectiveBackend>
makeHostLocalBackend(std::shared_ptr<CollectiveBackend> inner,
                     std::shared_ptr<Store> store,
                     std::chrono::milliseconds timeout);

/// NCCL for CUDA tensors; null when built without CUDA/NCCL (see
/// ncclAvailable()). Rendezvous keys are `monarch/nccl/<key>`, so it can
/// share a store with Gloo (`monarch/<key>`).
bool ncclAvailable();
std::shared_ptr<CollectiveBackend>
makeNcclBackend(std::shared_ptr<Store> store,
                std::chrono::milliseconds timeout);

/// The backend for CUDA tensors: per communicator, NCCL when every member
/// has a GPU of its own, else `host` on host copies of the buffers (NCCL
/// refuses two members on one device; workers sharing a GPU still work).
/// Null when built without CUDA/NCCL.
std::shared_ptr<CollectiveBackend>
makeCudaBackend(std::shared_ptr<Store> store,
                std::shared_ptr<CollectiveBackend> host,
                std::chrono::milliseconds timeout);

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_COLLECTIVES_H
