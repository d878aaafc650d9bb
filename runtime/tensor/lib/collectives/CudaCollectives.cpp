//===- CudaCollectives.cpp - NCCL, or host staging on a shared GPU --------===//
//
// NCCL refuses a communicator with two members on one device ("duplicate
// GPU"), yet several workers sharing a GPU is a normal set-up: the pipeline
// job's stages on a one-GPU machine, a laptop with one card. The CUDA backend
// therefore decides per communicator: every member publishes which device it
// is on (the GPU's UUID) through the store; when all differ the
// communicator is NCCL's, otherwise the host backend (Gloo) runs it on host
// copies of the buffers, copied on the caller's CUDA stream so the copies are
// ordered after the kernels that produced the data and before the ones that
// read the result. All members read the same identities, so all make the
// same choice. The UUID names the physical GPU: across hosts, GPU 0 of one
// host and GPU 0 of another differ even when the hosts share a name (as
// containers or network namespaces of one machine may), while two workers
// given one GPU under different CUDA_VISIBLE_DEVICES indices still match.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Collectives.h"

#ifdef MONARCH_HAVE_NCCL
#include "monarch/runtime/util/Log.h"

#include <cuda_runtime.h>

#include <set>
#include <thread>
#endif

namespace monarch::tensor {

#ifdef MONARCH_HAVE_NCCL
namespace {

Status cudaStatus(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return Status();
  return Status(ErrorCode::Internal,
                std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}

/// A communicator of the host backend over device buffers: each call copies
/// its device inputs to host memory, runs the host collective and copies the
/// outputs back, on `stream`, each copy waited for with `timeout`.
class HostStagedCommunicator : public Communicator {
public:
  HostStagedCommunicator(std::shared_ptr<Communicator> host,
                         cudaStream_t stream, cudaEvent_t done,
                         std::chrono::milliseconds timeout)
      : host(std::move(host)), stream(stream), done(done), timeout(timeout) {}
  ~HostStagedCommunicator() override { cudaEventDestroy(done); }

  int rank() const override { return host->rank(); }
  int size() const override { return host->size(); }

  Status allreduce(Buffer b, ReduceKind kind) override {
    return staged({{b, InOut}}, [&](std::vector<Buffer> &h) {
      return host->allreduce(h[0], kind);
    });
  }
  Status reduceScatter(Buffer in, Buffer out, ReduceKind kind) override {
    return staged({{in, In}, {out, Out}}, [&](std::vector<Buffer> &h) {
      return host->reduceScatter(h[0], h[1], kind);
    });
  }
  Status allgather(Buffer in, Buffer out) override {
    return staged({{in, In}, {out, Out}}, [&](std::vector<Buffer> &h) {
      return host->allgather(h[0], h[1]);
    });
  }
  Status alltoall(Buffer in, Buffer out) override {
    return staged({{in, In}, {out, Out}}, [&](std::vector<Buffer> &h) {
      return host->alltoall(h[0], h[1]);
    });
  }
  Status broadcast(Buffer b, int root) override {
    return staged({{b, InOut}}, [&](std::vector<Buffer> &h) {
      return host->broadcast(h[0], root);
    });
  }
  Status sendRecv(const std::vector<PeerBuffer> &sends,
                  const std::vector<PeerBuffer> &recvs, uint64_t tag) override {
    std::vector<Staged> all;
    for (const auto &s : sends)
      all.push_back({s.buffer, In});
    for (const auto &r : recvs)
      all.push_back({r.buffer, Out});
    return staged(all, [&](std::vector<Buffer> &h) {
      std::vector<PeerBuffer> hs, hr;
      for (size_t i = 0; i < sends.size(); ++i)
        hs.push_back({h[i], sends[i].peer});
      for (size_t i = 0; i < recvs.size(); ++i)
        hr.push_back({h[sends.size() + i], recvs[i].peer});
      return host->sendRecv(hs, hr, tag);
    });
  }

private:
  /// Which way a device buffer's bytes travel around the host collective.
  enum Direction { In = 1, Out = 2, InOut = In | Out };
  struct Staged {
    Buffer device;
    Direction direction;
  };

  /// Gives each buffer a host image (inputs copied in), runs `op` on the
  /// images, and copies the outputs' images back.
  template <typename Op>
  Status staged(const std::vector<Staged> &buffers, Op op) {
    std::vector<std::vector<char>> images(buffers.size());
    std::vector<Buffer> onHost(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) {
      const Buffer &d = buffers[i].device;
      images[i].resize(d.count * elementSize(d.dtype));
      onHost[i] = {images[i].data(), d.count, d.dtype};
      if (buffers[i].direction & In)
        if (Status s = copy(images[i].data(), d.data, images[i].size(),
                            cudaMemcpyDeviceToHost);
            !s.isOk())
          return s;
    }
    if (Status s = wait(); !s.isOk())
      return s;
    if (Status s = op(onHost); !s.isOk())
      return s;
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].direction & Out)
        if (Status s = copy(buffers[i].device.data, images[i].data(),
                            images[i].size(), cudaMemcpyHostToDevice);
            !s.isOk())
          return s;
    // Pageable host memory: the copies must finish before `images` goes.
    return wait();
  }

  Status copy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind) {
    return cudaStatus(cudaMemcpyAsync(to, from, bytes, kind, stream),
                      kind == cudaMemcpyDeviceToHost ? "copy to host"
                                                     : "copy to device");
  }

  Status wait() {
    if (Status s = cudaStatus(cudaEventRecord(done, stream), "record event");
        !s.isOk())
      return s;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess)
        return Status();
      if (q != cudaErrorNotReady)
        return cudaStatus(q, "staging copy");
      if (std::chrono::steady_clock::now() >= deadline)
        return Status(ErrorCode::Internal,
                      "cuda: staging copy timed out on a shared GPU");
      std::this_thread::yield();
    }
  }

  std::shared_ptr<Communicator> host;
  cudaStream_t stream;
  cudaEvent_t done;
  std::chrono::milliseconds timeout;
};

/// "GPU-<uuid>" of `device` (the current one when negative), as nvidia-smi
/// -L prints it.
Expected<std::string> deviceIdentity(int device) {
  if (device < 0)
    if (Status s = cudaStatus(cudaGetDevice(&device), "current device");
        !s.isOk())
      return s;
  cudaDeviceProp prop;
  if (Status s = cudaStatus(cudaGetDeviceProperties(&prop, device),
                            "device properties");
      !s.isOk())
    return s;
  static const char *hex = "0123456789abcdef";
  std::string id = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      id += '-';
    auto byte = static_cast<unsigned char>(prop.uuid.bytes[i]);
    id += hex[byte >> 4];
    id += hex[byte & 15];
  }
  return id;
}

class CudaBackend : public CollectiveBackend {
public:
  CudaBackend(std::shared_ptr<Store> store,
              std::shared_ptr<CollectiveBackend> nccl,
              std::shared_ptr<CollectiveBackend> host,
              std::chrono::milliseconds timeout)
      : store(std::move(store)), nccl(std::move(nccl)), host(std::move(host)),
        timeout(timeout) {}
  const char *name() const override { return "cuda"; }

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
    auto shared = sharesADevice(key, ranks.size(), *member, queue.device);
    if (!shared.ok())
      return shared.status();
    // Which way a communicator went is what a multi-GPU set-up is checked
    // by (MONARCH_LOG=debug; scripts/gpu-check.sh's cross-host test).
    log::debug("cuda: communicator ", key, " of ", ranks.size(), " ranks: ",
               *shared ? "host-staged (members share a GPU)"
                       : "NCCL (every member on its own GPU)");
    if (!*shared)
      return nccl->connectOn(key, ranks, self, queue);
    if (!host)
      return Status(ErrorCode::Internal,
                    "cuda: members of communicator " + key +
                        " share a GPU and no host backend is attached");
    auto comm = host->connect("cuda-staged/" + key, ranks, self);
    if (!comm.ok())
      return comm.status();
    if (queue.device >= 0)
      if (Status s = cudaStatus(cudaSetDevice(queue.device), "set device");
          !s.isOk())
        return s;
    cudaEvent_t done;
    if (Status s =
            cudaStatus(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
                       "create event");
        !s.isOk())
      return s;
    return std::shared_ptr<Communicator>(
        std::make_shared<HostStagedCommunicator>(
            std::move(comm).value(),
            static_cast<cudaStream_t>(queue.cudaStream), done, timeout));
  }

private:
  /// Whether two members of the communicator are on one device; every
  /// member computes the same answer from the same published identities.
  Expected<bool> sharesADevice(const std::string &key, size_t members,
                               int index, int device) {
    auto mine = deviceIdentity(device);
    if (!mine.ok())
      return mine.status();
    std::string prefix = "monarch/cuda-device/" + key + "/";
    const std::string &id = mine.value();
    if (Status s = store->set(prefix + std::to_string(index),
                              std::vector<char>(id.begin(), id.end()));
        !s.isOk())
      return s;
    std::set<std::string> seen;
    for (size_t i = 0; i < members; ++i) {
      auto v = store->get(prefix + std::to_string(i), timeout);
      if (!v.ok())
        return v.status();
      if (!seen.emplace(v.value().begin(), v.value().end()).second)
        return true;
    }
    return false;
  }

  std::shared_ptr<Store> store;
  std::shared_ptr<CollectiveBackend> nccl;
  std::shared_ptr<CollectiveBackend> host;
  std::chrono::milliseconds timeout;
};

} // namespace

std::shared_ptr<CollectiveBackend>
makeCudaBackend(std::shared_ptr<Store> store,
                std::shared_ptr<CollectiveBackend> host,
                std::chrono::milliseconds timeout) {
  auto nccl = makeNcclBackend(store, timeout);
  return std::make_shared<CudaBackend>(std::move(store), std::move(nccl),
                                       std::move(host), timeout);
}

#else

std::shared_ptr<CollectiveBackend>
makeCudaBackend(std::shared_ptr<Store>, std::shared_ptr<CollectiveBackend>,
                std::chrono::milliseconds) {
  return nullptr;
}

#endif

} // namespace monarch::tensor
