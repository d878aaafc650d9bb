//===- DeviceStream.cpp - CUDA streams and events of the executor --------===//
//
// DESIGN.md §5 ("on CUDA a CUDA stream") and §6.4 (borrow events). Each plan
// stream gets a CUDA stream from c10's pool, current on that stream's thread,
// so ATen launches its kernels there and two plan streams' kernels overlap on
// the GPU. Cross-stream hand-offs (borrows) record a CUDA event on one
// stream and make the other wait on it on the device; the host-side ordering
// of the executor stays as it is, so CPU tensors behave exactly as without
// CUDA. This is the only translation unit that includes CUDA headers, and
// only when torch has CUDA (MONARCH_TORCH_CUDA, set by CMake).
//
//===----------------------------------------------------------------------===//

#include "../Internal.h"

#include <atomic>
#include <optional>
#include <thread>

#ifdef MONARCH_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace monarch::tensor::detail {

namespace {
std::atomic<int> processDeviceIndex{-1};
std::atomic<bool> cudaIsWanted{false};
} // namespace

void setCudaWanted() { cudaIsWanted.store(true, std::memory_order_release); }

bool cudaWanted() { return cudaIsWanted.load(std::memory_order_acquire); }

void setProcessDevice(int device) {
  processDeviceIndex.store(device, std::memory_order_relaxed);
}

int processDevice() {
  return processDeviceIndex.load(std::memory_order_relaxed);
}

#ifdef MONARCH_TORCH_CUDA

namespace {

class CudaEvent final : public DeviceEvent {
public:
  // Timing off: these events only order work, and untimed events are
  // cheaper to record and wait on.
  /// Mutable: waiting on an event (block) is not a change of what it marks.
  mutable at::cuda::CUDAEvent event{cudaEventDisableTiming};
};

/// Polls `event` until it has completed or `timeout` passed: a bounded
/// cudaEventSynchronize. Spins briefly (most waits are short), then sleeps
/// so a long wait does not take a core from the other streams.
bool waitBounded(const at::cuda::CUDAEvent &event,
                 std::chrono::milliseconds timeout) {
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + timeout;
  auto spinUntil = start + std::chrono::microseconds(200);
  while (!event.query()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return false;
    if (now < spinUntil)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

class CudaStream final : public DeviceStream {
public:
  explicit CudaStream(int device)
      : index(static_cast<c10::DeviceIndex>(device)) {}

  void makeCurrent() override {
    // The pool stream is taken here, on the stream's thread and only once
    // CUDA is wanted: taking it creates the GPU context.
    c10::cuda::set_device(index);
    stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
    c10::cuda::setCurrentCUDAStream(*stream);
  }

  std::shared_ptr<DeviceEvent> record() override {
    auto e = std::make_shared<CudaEvent>();
    e->event.record(*stream);
    return e;
  }

  void wait(const DeviceEvent &event) override {
    // block() on an event never recorded is a no-op.
    static_cast<const CudaEvent &>(event).event.block(*stream);
  }

  bool synchronize(std::chrono::milliseconds timeout) override {
    at::cuda::CUDAEvent e(cudaEventDisableTiming);
    e.record(*stream);
    return waitBounded(e, timeout);
  }

  void recordUse(const at::Tensor &t) override {
    if (t.defined() && t.is_cuda() && t.has_storage())
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(),
                                                    *stream);
  }

  void *handle() const override { return stream->stream(); }
  int device() const override { return index; }

private:
  c10::DeviceIndex index;
  /// Set by makeCurrent(); the other calls come only after it (the
  /// executor hands tasks this object once it is current).
  std::optional<c10::cuda::CUDAStream> stream;
};

} // namespace

int workerDevice(int64_t rank) {
  // device_count() is 0 (not an error) without a driver or GPU.
  int count = static_cast<int>(c10::cuda::device_count());
  if (count <= 0)
    return -1;
  return static_cast<int>(rank % count);
}

std::shared_ptr<DeviceStream> makeDeviceStream(int device) {
  if (device < 0)
    return nullptr;
  return std::make_shared<CudaStream>(device);
}

#else // CPU-only torch: no device side at all.

int workerDevice(int64_t) { return -1; }

std::shared_ptr<DeviceStream> makeDeviceStream(int) { return nullptr; }

#endif

} // namespace monarch::tensor::detail
