//===- CudaCollectives.cpp - NCCL, or CUDA IPC and host staging on a GPU --===//
//
// NCCL refuses a communicator with two members on one device ("duplicate
// GPU"), yet several workers sharing a GPU is a normal set-up: the pipeline
// job's stages on a one-GPU machine, a laptop with one card. The CUDA backend
// therefore decides per communicator: every member publishes which device it
// is on (the GPU's UUID) through the store; when all differ the
// communicator is NCCL's. Otherwise point-to-point transfers between members
// on one GPU move device to device through CUDA IPC (CudaIpcRing.h), with no
// host copy or synchronization, and everything else (collectives, transfers
// with members on other GPUs) runs on the host backend (Gloo) over host
// copies of the buffers, copied on the caller's CUDA stream so the copies
// are ordered after the kernels that produced the data and before the ones
// that read the result. All members read the same identities, so all make
// the same choice. The UUID names the physical GPU: across hosts, GPU 0 of
// one host and GPU 0 of another differ even when the hosts share a name (as
// containers or network namespaces of one machine may), while two workers
// given one GPU under different CUDA_VISIBLE_DEVICES indices still match.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Collectives.h"

#ifdef MONARCH_HAVE_NCCL
#include "CudaIpcRing.h"
#include "monarch/runtime/util/Log.h"
#include "monarch/runtime/util/OnOff.h"
#include "monarch/runtime/util/Polling.h"

#include <cuda_runtime.h>

#include <atomic>
#include <map>
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

/// A communicator some of whose members share this process's GPU: transfers
/// with those members go through a CUDA IPC ring per direction, made at the
/// direction's first transfer; collectives, and transfers with members on
/// other GPUs, go through the host-staged communicator it decorates. A
/// direction whose sender cannot make its ring (IPC refused by the driver)
/// is moved through the host instead, with one warning on each side.
class SharedGpuCommunicator : public ForwardingCommunicator {
public:
  SharedGpuCommunicator(std::shared_ptr<Communicator> staged,
                        std::shared_ptr<Store> store, std::string key,
                        std::vector<bool> onMyGpu, cudaStream_t stream,
                        int device, std::chrono::milliseconds timeout)
      : ForwardingCommunicator(std::move(staged)), store(std::move(store)),
        key(std::move(key)), onMyGpu(std::move(onMyGpu)), stream(stream),
        device(device), timeout(timeout) {}
  /// The receivers copy out of this end's slots until they have them all.
  ~SharedGpuCommunicator() override {
    if (!aborted)
      for (auto &[peer, ring] : sendRings)
        if (ring)
          ring->drain(cudaipc::kDrainTimeout);
  }

  /// The ring transfers first, all advanced together (so an exchange both
  /// ways in one call cannot deadlock on full rings), then the host ones;
  /// every member orders its own transfers the same way.
  Status sendRecv(const std::vector<PeerBuffer> &sends,
                  const std::vector<PeerBuffer> &recvs, uint64_t tag) override {
    struct Pending {
      cudaipc::SendRing *send = nullptr;
      cudaipc::ReceiveRing *receive = nullptr;
      Buffer buffer;
      size_t offset = 0;
      bool done = false;
    };
    std::vector<Pending> pending;
    std::vector<PeerBuffer> hostSends, hostRecvs;
    for (const auto &s : sends) {
      Expected<cudaipc::SendRing *> ring =
          onMyGpu.at(s.peer) ? sendRing(s.peer) : nullptr;
      if (!ring.ok())
        return ring.status();
      if (*ring)
        pending.push_back({*ring, nullptr, s.buffer});
      else
        hostSends.push_back(s);
    }
    for (const auto &r : recvs) {
      Expected<cudaipc::ReceiveRing *> ring =
          onMyGpu.at(r.peer) ? receiveRing(r.peer) : nullptr;
      if (!ring.ok())
        return ring.status();
      if (*ring)
        pending.push_back({nullptr, *ring, r.buffer});
      else
        hostRecvs.push_back(r);
    }
    auto start = std::chrono::steady_clock::now();
    for (size_t left = pending.size(); left > 0;) {
      for (auto &p : pending) {
        if (p.done)
          continue;
        size_t bytes = p.buffer.count * elementSize(p.buffer.dtype);
        auto done = p.send ? p.send->push(static_cast<const char *>(
                                              p.buffer.data),
                                          bytes, p.offset, tag)
                           : p.receive->pop(static_cast<char *>(p.buffer.data),
                                            bytes, p.offset, tag);
        if (!done.ok())
          return done.status();
        if (*done) {
          p.done = true;
          --left;
        }
      }
      if (left == 0)
        break;
      if (aborted.load())
        return Status(ErrorCode::Closed,
                      "cuda ipc: communicator " + key + " aborted");
      auto now = std::chrono::steady_clock::now();
      if (now - start >= timeout)
        return Status(ErrorCode::Timeout,
                      "cuda ipc: a peer on this GPU did not take part in a "
                      "transfer of communicator " +
                          key + " within the timeout");
      backOff(now - start, std::chrono::microseconds(20)); // as NCCL's wait
    }
    if (hostSends.empty() && hostRecvs.empty())
      return Status();
    return inner->sendRecv(hostSends, hostRecvs, tag);
  }

  void abort() override {
    aborted = true;
    inner->abort();
  }

private:
  std::string ringKey(int from, int to) const {
    return "monarch/cuda-ipc/" + key + "/" + std::to_string(from) + "-" +
           std::to_string(to);
  }

  /// The ring to `peer`, made and published at the first send; null when
  /// this direction goes through the host.
  Expected<cudaipc::SendRing *> sendRing(int peer) {
    if (auto it = sendRings.find(peer); it != sendRings.end())
      return it->second.get();
    if (Status s = onDevice(); !s.isOk())
      return s;
    auto ring = cudaipc::SendRing::create(stream);
    std::vector<char> published =
        ring.ok() ? ring.value()->descriptor()
                  : cudaipc::errorDescriptor(ring.status().message());
    if (Status s = store->set(ringKey(rank(), peer), published); !s.isOk())
      return s;
    if (!ring.ok())
      log::warning("cuda: communicator ", key, ": no CUDA IPC to rank ", peer,
                   " on this GPU (", ring.status().message(),
                   "); its transfers go through host copies");
    auto &slot = sendRings[peer];
    if (ring.ok())
      slot = std::move(ring).value();
    return slot.get();
  }

  /// The ring from `peer`, opened at the first receive once the peer has
  /// published it; null when the peer could not make it.
  Expected<cudaipc::ReceiveRing *> receiveRing(int peer) {
    if (auto it = receiveRings.find(peer); it != receiveRings.end())
      return it->second.get();
    auto published = store->get(ringKey(peer, rank()), timeout);
    if (!published.ok())
      return published.status();
    if (Status s = onDevice(); !s.isOk())
      return s;
    auto ring = cudaipc::ReceiveRing::open(published.value(), stream);
    if (!ring.ok() && ring.status().code() != ErrorCode::NotFound)
      return ring.status();
    if (!ring.ok())
      log::warning("cuda: communicator ", key, ": no CUDA IPC from rank ",
                   peer, " on this GPU (", ring.status().message(),
                   "); its transfers go through host copies");
    auto &slot = receiveRings[peer];
    if (ring.ok())
      slot = std::move(ring).value();
    return slot.get();
  }

  Status onDevice() {
    return device < 0 ? Status()
                      : cudaStatus(cudaSetDevice(device), "set device");
  }

  std::shared_ptr<Store> store;
  std::string key;
  std::vector<bool> onMyGpu; // by member index
  cudaStream_t stream;
  int device;
  std::chrono::milliseconds timeout;
  std::map<int, std::unique_ptr<cudaipc::SendRing>> sendRings;
  std::map<int, std::unique_ptr<cudaipc::ReceiveRing>> receiveRings;
  std::atomic<bool> aborted{false};
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
        timeout(timeout), useIpc(ipcSetting()) {}
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
    auto identities = deviceIdentities(key, ranks.size(), *member, queue.device);
    if (!identities.ok())
      return identities.status();
    const std::vector<std::string> &ids = identities.value();
    bool shared = std::set<std::string>(ids.begin(), ids.end()).size() <
                  ids.size();
    // Which way a communicator went is what a multi-GPU set-up is checked
    // by (MONARCH_LOG=debug; scripts/gpu-check.sh's cross-host test).
    log::debug("cuda: communicator ", key, " of ", ranks.size(), " ranks: ",
               !shared ? "NCCL (every member on its own GPU)"
               : useIpc
                   ? "CUDA IPC and host-staged (members share a GPU)"
                   : "host-staged (members share a GPU; MONARCH_CUDA_IPC=off)");
    if (!shared)
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
    auto stream = static_cast<cudaStream_t>(queue.cudaStream);
    auto staged = std::make_shared<HostStagedCommunicator>(
        std::move(comm).value(), stream, done, timeout);
    std::vector<bool> onMyGpu; // all false: every transfer host-staged
    for (const auto &id : ids)
      onMyGpu.push_back(useIpc && id == ids[*member]);
    return std::shared_ptr<Communicator>(
        std::make_shared<SharedGpuCommunicator>(
            std::move(staged), store, key, std::move(onMyGpu), stream,
            queue.device, timeout));
  }

private:
  /// MONARCH_CUDA_IPC=off in the worker's environment moves same-GPU
  /// transfers through host copies as well (a baseline, and a way around a
  /// driver that misbehaves); on, or unset, through CUDA IPC.
  static bool ipcSetting() {
    return onOffFromEnv("MONARCH_CUDA_IPC", true,
                        "same-GPU transfers use CUDA IPC");
  }

  /// Every member's device identity, by member index; every member reads
  /// the same list from the same published identities.
  Expected<std::vector<std::string>>
  deviceIdentities(const std::string &key, size_t members, int index,
                   int device) {
    auto mine = deviceIdentity(device);
    if (!mine.ok())
      return mine.status();
    return gatherThroughStore(*store, "monarch/cuda-device/" + key + "/",
                              index, members, mine.value(), timeout);
  }

  std::shared_ptr<Store> store;
  std::shared_ptr<CollectiveBackend> nccl;
  std::shared_ptr<CollectiveBackend> host;
  std::chrono::milliseconds timeout;
  bool useIpc;
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
