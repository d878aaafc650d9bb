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
// Device-time tracing (docs/runtime.md, "Tracing"): with a trace sink, each
// traced instruction is bracketed by timed CUDA events on the stream; the
// stream thread reports the spans once the GPU has passed them (at fetches
// and status requests, which synchronize, and when it goes idle), placing
// them on the host clock through an anchor event (DeviceClock.h). The
// events come from a pool and at most kMaxPending spans wait, so memory
// stays bounded however long the plan.
//
//===----------------------------------------------------------------------===//

#include "../Internal.h"
#include "monarch/runtime/util/Polling.h"

#include <atomic>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#ifdef MONARCH_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <torch/version.h>
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
  while (!event.query()) {
    auto waited = std::chrono::steady_clock::now() - start;
    if (waited >= timeout)
      return false;
    backOff(waited, std::chrono::microseconds(50));
  }
  return true;
}

using TimedEvent = std::unique_ptr<at::cuda::CUDAEvent>;

/// The device-time trace of one CUDA stream: timed events around each
/// traced instruction, resolved to host-clock spans once completed. Used
/// by the stream's thread only. Any CUDA error turns it off for good (a
/// trace must never fail the instruction it brackets).
class DeviceTimeline {
public:
  DeviceTimeline(const TraceSink &sink, int64_t planStream)
      : sink(sink), planStream(planStream) {}

  void begin(const c10::cuda::CUDAStream &s) {
    if (broken)
      return;
    guard([&] {
      renewAnchor(s);
      if (!anchor)
        return;
      open = take();
      open->record(s);
    });
  }

  void end(const c10::cuda::CUDAStream &s, int64_t instruction,
           std::string_view name, int64_t recording) {
    if (broken || !open)
      return;
    guard([&] {
      TimedEvent e = take();
      e->record(s);
      pending.push_back({std::move(open), std::move(e), anchor, instruction,
                         recording, std::string(name)});
      if (pending.size() >= kCollectAt)
        collect();
      // Bounded: past kMaxPending the thread waits for the oldest span's
      // work (the GPU is then far behind the host anyway).
      if (pending.size() >= kMaxPending &&
          waitBounded(*pending.front().end, std::chrono::seconds(60)))
        collect();
    });
  }

  void collect() {
    guard([&] {
      while (!pending.empty() && pending.front().end->query()) {
        Span &sp = pending.front();
        const Anchor &a = *sp.anchor;
        HostSpan h = hostSpanOf(a.clock, a.event.elapsed_time(*sp.start),
                                a.event.elapsed_time(*sp.end));
        sink(sp.instruction, planStream, sp.name, sp.recording, h.startNs,
             h.endNs, /*onDevice=*/true);
        give(std::move(sp.start));
        give(std::move(sp.end));
        pending.pop_front();
      }
    });
  }

private:
  struct Anchor {
    at::cuda::CUDAEvent event{cudaEventDefault};
    ClockAnchor clock;
  };
  struct Span {
    TimedEvent start, end;
    std::shared_ptr<const Anchor> anchor; ///< the one current at begin
    int64_t instruction, recording;
    std::string name; ///< owned: the span outlives the instruction
  };
  static constexpr size_t kCollectAt = 256, kMaxPending = 4096;

  template <typename F> void guard(F &&f) {
    try {
      f();
    } catch (...) {
      broken = true;
      open.reset();
      pending.clear();
    }
  }

  TimedEvent take() {
    if (pool.empty())
      return std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    TimedEvent e = std::move(pool.back());
    pool.pop_back();
    return e;
  }
  void give(TimedEvent e) { pool.push_back(std::move(e)); }

  /// A new anchor when DeviceClock.h's policy asks for one, recorded on an
  /// idle stream so that it completes as soon as the GPU sees it.
  void renewAnchor(const c10::cuda::CUDAStream &s) {
    AnchorAction action = anchorAction(
        policy, anchor ? &anchor->clock : nullptr, traceNowNs(), s.query());
    if (action == AnchorAction::Keep)
      return;
    if (action == AnchorAction::RenewAfterDrain) {
      at::cuda::CUDAEvent drained(cudaEventDisableTiming);
      drained.record(s);
      if (!waitBounded(drained, std::chrono::seconds(60)))
        return; // keep the old anchor (without one, trace nothing yet)
    }
    auto next = std::make_shared<Anchor>();
    int64_t before = traceNowNs();
    next->event.record(s);
    // Spin, not sleep: the window is the anchor's error.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    bool done = false;
    while (!(done = next->event.query()) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    if (!done)
      return;
    next->clock = anchorBetween(before, traceNowNs());
    anchor = std::move(next);
  }

  const TraceSink &sink;
  int64_t planStream;
  AnchorPolicy policy;
  std::shared_ptr<const Anchor> anchor;
  TimedEvent open; ///< start of the traced instruction in flight
  std::deque<Span> pending;
  std::vector<TimedEvent> pool;
  bool broken = false;
};

/// A captured graph (at::cuda::CUDAGraph: torch's capture, which routes the
/// capture's allocations to a private pool of the caching allocator and
/// keeps the default generator's Philox offsets right across replays).
class CudaGraph final : public DeviceGraph {
public:
  void replay() override { graph.replay(); }
  int64_t poolBytes() const override { return bytes; }

  at::cuda::CUDAGraph graph;
  int64_t bytes = 0;
};

/// The caching allocator's reserved bytes on `device` (all pools).
int64_t reservedBytes(c10::DeviceIndex device) {
  // Index 0 of each stat array is the aggregate over pool kinds (StatType
  // moved namespaces between torch 1.x and 2.x; the layout did not).
  return c10::cuda::CUDACachingAllocator::getDeviceStats(device)
      .reserved_bytes[0]
      .current;
}

class CudaStream final : public DeviceStream {
public:
  CudaStream(int device, const TraceSink *trace, int64_t planStream)
      : index(static_cast<c10::DeviceIndex>(device)), trace(trace),
        planStream(planStream) {}

  void makeCurrent() override {
    // The pool stream is taken here, on the stream's thread and only once
    // CUDA is wanted: taking it creates the GPU context.
    c10::cuda::set_device(index);
    stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
    c10::cuda::setCurrentCUDAStream(*stream);
    if (trace)
      timeline.emplace(*trace, planStream);
  }

  void traceBegin() override {
    if (timeline)
      timeline->begin(*stream);
  }

  void traceEnd(int64_t instruction, std::string_view name,
                int64_t recording) override {
    if (timeline)
      timeline->end(*stream, instruction, name, recording);
  }

  void traceCollect() override {
    if (timeline)
      timeline->collect();
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
    if (!waitBounded(e, timeout))
      return false;
    traceCollect(); // everything traced so far has run
    return true;
  }

  void recordUse(const at::Tensor &t) override {
    if (t.defined() && t.is_cuda() && t.has_storage())
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(),
                                                    *stream);
  }

  std::unique_ptr<DeviceGraph> capture(const std::function<void()> &body,
                                       std::string &error) override {
    auto g = std::make_unique<CudaGraph>();
    int64_t before = reservedBytes(index);
    try {
#if TORCH_VERSION_MAJOR >= 2
      // Thread-local: only this thread's unsafe calls (a sync, a
      // cudaMalloc) break the capture; the other streams' threads go on.
      g->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
      g->graph.capture_begin();
#endif
    } catch (const std::exception &e) {
      error = std::string("cannot begin a CUDA graph capture: ") + e.what();
      (void)cudaGetLastError();
      return nullptr;
    }
    try {
      body();
    } catch (const std::exception &e) {
      error = e.what();
    } catch (...) {
      error = "unknown exception";
    }
    // End the capture whatever happened: the stream leaves capture mode
    // and the allocator its pool (an invalidated capture throws here).
    try {
      g->graph.capture_end();
    } catch (const std::exception &e) {
      if (error.empty())
        error = e.what();
    }
    (void)cudaGetLastError(); // a failed capture's error is not sticky
    if (!error.empty())
      return nullptr;
    g->bytes = reservedBytes(index) - before;
    return g;
  }

  void *handle() const override { return stream->stream(); }
  int device() const override { return index; }

private:
  c10::DeviceIndex index;
  const TraceSink *trace;
  int64_t planStream;
  /// Set by makeCurrent(); the other calls come only after it (the
  /// executor hands tasks this object once it is current).
  std::optional<c10::cuda::CUDAStream> stream;
  std::optional<DeviceTimeline> timeline; ///< with a trace sink
};

} // namespace

int workerDevice(int64_t rank) {
  // device_count() is 0 (not an error) without a driver or GPU.
  int count = static_cast<int>(c10::cuda::device_count());
  if (count <= 0)
    return -1;
  return static_cast<int>(rank % count);
}

std::shared_ptr<DeviceStream>
makeDeviceStream(int device, const TraceSink *trace, int64_t planStream) {
  if (device < 0)
    return nullptr;
  return std::make_shared<CudaStream>(device, trace, planStream);
}

#else // CPU-only torch: no device side at all.

int workerDevice(int64_t) { return -1; }

std::shared_ptr<DeviceStream> makeDeviceStream(int, const TraceSink *,
                                               int64_t) {
  return nullptr;
}

#endif

} // namespace monarch::tensor::detail
