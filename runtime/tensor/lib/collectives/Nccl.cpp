//===- Nccl.cpp - The NCCL collective backend (CUDA tensors) --------------===//
//
// Compiled with MONARCH_HAVE_NCCL when CMake finds the CUDA toolkit and NCCL.
// A communicator enqueues each operation on a CUDA stream: the caller's
// (connectOn: the executor passes the instruction's stream's CUDA stream, so
// the collective is ordered after the kernels that produced its buffers and
// before the ones that read its result, with no host synchronization in
// between), or one it owns (connect). Each call then waits for an event
// recorded after the operation (bounded by the timeout, aborting the
// communicator on expiry), so the interface stays blocking like Gloo's and a
// failure is reported by the instruction that caused it.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Collectives.h"
#include "monarch/runtime/util/Polling.h"

#ifdef MONARCH_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>
#endif

namespace monarch::tensor {

#ifdef MONARCH_HAVE_NCCL
namespace {

Expected<ncclDataType_t> ncclType(plan::DType dtype) {
  switch (dtype) {
  case plan::FLOAT32:
    return ncclFloat32;
  case plan::FLOAT64:
    return ncclFloat64;
  case plan::FLOAT16:
    return ncclFloat16;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
  case plan::BFLOAT16:
    return ncclBfloat16;
#endif
  case plan::INT32:
    return ncclInt32;
  case plan::INT64:
    return ncclInt64;
  case plan::INT8:
    return ncclInt8;
  case plan::UINT8:
    return ncclUint8;
  default:
    return Status(ErrorCode::Invalid,
                  "nccl: unsupported dtype " + plan::DType_Name(dtype));
  }
}

ncclRedOp_t ncclOp(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum:
    return ncclSum;
  case ReduceKind::Product:
    return ncclProd;
  case ReduceKind::Min:
    return ncclMin;
  case ReduceKind::Max:
    return ncclMax;
  }
  return ncclSum;
}

class NcclCommunicator : public Communicator {
public:
  /// Takes `comm`, `done`, and `stream` when `ownsStream`.
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream, bool ownsStream,
                   cudaEvent_t done, int rank, int size,
                   std::chrono::milliseconds timeout)
      : comm(comm), stream(stream), ownsStream(ownsStream), done(done),
        myRank(rank), n(size), timeout(timeout) {}
  ~NcclCommunicator() override {
    ncclCommDestroy(comm);
    cudaEventDestroy(done);
    if (ownsStream)
      cudaStreamDestroy(stream);
  }

  int rank() const override { return myRank; }
  int size() const override { return n; }

  Status allreduce(Buffer b, ReduceKind kind) override {
    auto t = ncclType(b.dtype);
    if (!t.ok())
      return t.status();
    return finish(ncclAllReduce(b.data, b.data, b.count, t.value(),
                                ncclOp(kind), comm, stream));
  }
  Status reduceScatter(Buffer in, Buffer out, ReduceKind kind) override {
    auto t = ncclType(in.dtype);
    if (!t.ok())
      return t.status();
    return finish(ncclReduceScatter(in.data, out.data, out.count, t.value(),
                                    ncclOp(kind), comm, stream));
  }
  Status allgather(Buffer in, Buffer out) override {
    return finish(ncclAllGather(in.data, out.data,
                                in.count * elementSize(in.dtype), ncclUint8,
                                comm, stream));
  }
  Status alltoall(Buffer in, Buffer out) override {
    size_t block = in.count * elementSize(in.dtype) / n;
    ncclGroupStart();
    for (int peer = 0; peer < n; ++peer) {
      ncclSend(static_cast<char *>(in.data) + peer * block, block, ncclUint8,
               peer, comm, stream);
      ncclRecv(static_cast<char *>(out.data) + peer * block, block, ncclUint8,
               peer, comm, stream);
    }
    return finish(ncclGroupEnd());
  }
  Status broadcast(Buffer b, int root) override {
    return finish(ncclBroadcast(b.data, b.data, b.count * elementSize(b.dtype),
                                ncclUint8, root, comm, stream));
  }
  Status sendRecv(const std::vector<PeerBuffer> &sends,
                  const std::vector<PeerBuffer> &recvs, uint64_t) override {
    ncclGroupStart();
    for (const auto &r : recvs)
      ncclRecv(r.buffer.data, r.buffer.count * elementSize(r.buffer.dtype),
               ncclUint8, r.peer, comm, stream);
    for (const auto &s : sends)
      ncclSend(s.buffer.data, s.buffer.count * elementSize(s.buffer.dtype),
               ncclUint8, s.peer, comm, stream);
    return finish(ncclGroupEnd());
  }

private:
  /// Waits for the enqueued work, bounded by the timeout. An event rather
  /// than the stream: on a caller's stream, later work is not ours to wait
  /// for.
  Status finish(ncclResult_t launched) {
    if (launched != ncclSuccess)
      return Status(ErrorCode::Internal,
                    std::string("nccl: ") + ncclGetErrorString(launched));
    if (cudaError_t e = cudaEventRecord(done, stream); e != cudaSuccess)
      return Status(ErrorCode::Internal,
                    std::string("cuda: ") + cudaGetErrorString(e));
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + timeout;
    while (true) {
      cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess)
        return Status();
      if (q != cudaErrorNotReady)
        return Status(ErrorCode::Internal,
                      std::string("cuda: ") + cudaGetErrorString(q));
      ncclResult_t async;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess)
        return Status(ErrorCode::Internal,
                      std::string("nccl: ") + ncclGetErrorString(async));
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        ncclCommAbort(comm);
        return Status(ErrorCode::Internal, "nccl: collective timed out");
      }
      backOff(now - start, std::chrono::microseconds(20));
    }
  }

  ncclComm_t comm;
  cudaStream_t stream;
  bool ownsStream;
  cudaEvent_t done;
  int myRank, n;
  std::chrono::milliseconds timeout;
};

class NcclBackend : public CollectiveBackend {
public:
  NcclBackend(std::shared_ptr<Store> store, std::chrono::milliseconds timeout)
      : store(std::move(store)), timeout(timeout) {}
  const char *name() const override { return "nccl"; }

  Expected<std::shared_ptr<Communicator>>
  connect(const std::string &key, const std::vector<int64_t> &ranks,
          int64_t self) override {
    return connectOn(key, ranks, self, DeviceQueue{});
  }

  Expected<std::shared_ptr<Communicator>>
  connectOn(const std::string &key, const std::vector<int64_t> &ranks,
            int64_t self, const DeviceQueue &queue) override {
    Expected<int> member = memberIndex(key, ranks, self);
    if (!member.ok())
      return member.status();
    int index = *member;
    ncclUniqueId id;
    std::string idKey = "monarch/nccl/" + key;
    if (index == 0) {
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
        return Status(ErrorCode::Internal,
                      std::string("nccl: ") + ncclGetErrorString(r));
      std::vector<char> bytes(reinterpret_cast<char *>(&id),
                              reinterpret_cast<char *>(&id) + sizeof(id));
      if (Status s = store->set(idKey, bytes); !s.isOk())
        return s;
    } else {
      auto bytes = store->get(idKey, timeout);
      if (!bytes.ok())
        return bytes.status();
      if (bytes.value().size() != sizeof(id))
        return Status(ErrorCode::Internal,
                      "nccl: malformed unique id for " + key);
      std::memcpy(&id, bytes.value().data(), sizeof(id));
    }
    // NCCL binds a communicator to the current device: the queue's.
    if (queue.device >= 0)
      if (cudaError_t e = cudaSetDevice(queue.device); e != cudaSuccess)
        return Status(ErrorCode::Internal,
                      std::string("cuda: ") + cudaGetErrorString(e));
    cudaStream_t stream = static_cast<cudaStream_t>(queue.cudaStream);
    bool owns = stream == nullptr;
    if (owns && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
                    cudaSuccess)
      return Status(ErrorCode::Internal, "cuda: cannot create a stream");
    cudaEvent_t done;
    if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) !=
        cudaSuccess) {
      if (owns)
        cudaStreamDestroy(stream);
      return Status(ErrorCode::Internal, "cuda: cannot create an event");
    }
    ncclComm_t comm;
    if (ncclResult_t r =
            ncclCommInitRank(&comm, static_cast<int>(ranks.size()), id, index);
        r != ncclSuccess) {
      cudaEventDestroy(done);
      if (owns)
        cudaStreamDestroy(stream);
      return Status(ErrorCode::Internal,
                    std::string("nccl: ") + ncclGetErrorString(r));
    }
    return std::shared_ptr<Communicator>(std::make_shared<NcclCommunicator>(
        comm, stream, owns, done, index, static_cast<int>(ranks.size()),
        timeout));
  }

private:
  std::shared_ptr<Store> store;
  std::chrono::milliseconds timeout;
};

} // namespace

bool ncclAvailable() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

std::shared_ptr<CollectiveBackend>
makeNcclBackend(std::shared_ptr<Store> store,
                std::chrono::milliseconds timeout) {
  return std::make_shared<NcclBackend>(std::move(store), timeout);
}

#else

bool ncclAvailable() { return false; }

std::shared_ptr<CollectiveBackend> makeNcclBackend(std::shared_ptr<Store>,
                                                   std::chrono::milliseconds) {
  return nullptr;
}

#endif

} // namespace monarch::tensor
