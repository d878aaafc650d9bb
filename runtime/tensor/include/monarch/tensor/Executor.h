//===- Executor.h - The tensor engine of one worker -------------*- C++ -*-===//
//
// Executes plan instructions for one rank (DESIGN.md §5 "Tensor worker", §6).
// A worker actor owns one Executor, feeds it instructions with submit() from
// its message handler (one thread), and forwards the callbacks as replies to
// the controller. This header is torch-free so such hosts compile quickly;
// registered functions and actor bridges (torch types) are in Functions.h.
//
// Threading: submit() does the static part of each instruction (mesh
// membership, ownership, borrow state, operator lookup) on the caller's thread
// and queues the rest on the instruction's stream; each stream is a thread
// executing its queue in order. Callbacks run on stream threads, one at a
// time.
//
// CUDA: when torch has CUDA and a GPU exists, the worker's device is
// cuda:(rank % device count) and each stream's thread also owns a CUDA
// stream of it (kernels of different streams overlap on the GPU); borrows
// order the two CUDA streams with events, fetch waits for its stream's
// kernels, and `cuda` / `cuda:N` in a plan name the worker's device.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_EXECUTOR_H
#define MONARCH_TENSOR_EXECUTOR_H

#include "monarch/tensor/Collectives.h"
#include "monarch/tensor/Status.h"
#include "monarch/tensor/plan.pb.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace monarch::tensor {

class ActorBridge;

struct ExecutorOptions {
  /// This worker's global rank in the root mesh.
  int64_t rank = 0;
  /// The root mesh, e.g. {{"host", 2}, {"gpu", 2}}.
  std::vector<std::pair<std::string, int64_t>> rootShape;
  /// For CPU tensors (Gloo). Collectives fail as instructions without one.
  std::shared_ptr<CollectiveBackend> collectives;
  /// For CUDA tensors (NCCL, makeNcclBackend): reduce and to_mesh pick the
  /// backend by the input tensor's device and run NCCL on the instruction's
  /// stream's CUDA stream. Without one, collectives of CUDA tensors fail as
  /// instructions.
  std::shared_ptr<CollectiveBackend> cudaCollectives;
  /// Bytes of CPU tensor memory this process may hold; 0 = unlimited. An
  /// allocation past it fails its instruction only. Process-wide (one worker
  /// per process).
  size_t memoryCapBytes = 0;
  /// Bound on every blocking wait (borrow events, rendezvous, collectives).
  std::chrono::milliseconds timeout{60000};
  /// Endpoints for CallActor; optional.
  std::shared_ptr<ActorBridge> actors;
  /// ATen intra-op threads of this process; 0 leaves torch's default (one
  /// per core), which oversubscribes a host running several workers.
  int intraOpThreads = 0;
  /// Ranks whose processes failed, shared with the collective backends (so
  /// that a rendezvous with one gives up); made by the executor if null.
  std::shared_ptr<PeerHealth> health;
  /// CUDA graphs (docs/plan.md, "CUDA graphs"): a recording the plan
  /// marks as a candidate (Recording.cuda_graph) runs on a CUDA stream as
  /// captured graphs of its stretches of at least `cudaGraphMinOps` ATen
  /// calls, at most `cudaGraphMax` graphs and `cudaGraphPoolBytes` of their
  /// pools at once on this worker. False runs every recording op by op
  /// (the tensor worker sets this from WorkerConfig, else from
  /// MONARCH_CUDA_GRAPHS=on|off, else on).
  bool cudaGraphs = true;
  size_t cudaGraphMinOps = 2;
  int64_t cudaGraphMax = 256;
  /// Device memory the graphs' pools may hold before no more are captured.
  int64_t cudaGraphPoolBytes = int64_t(1) << 30;
};

/// What the CUDA graphs of one executor did (all zero without CUDA).
struct CudaGraphStats {
  int64_t graphs = 0;   ///< captured and alive
  int64_t captures = 0; ///< successful captures so far
  int64_t replays = 0;
  /// Segments that can never be captured (a failed capture, a CPU result,
  /// shapes that kept changing, the bound on graphs).
  int64_t refused = 0;
  int64_t poolBytes = 0; ///< device memory the live graphs' pools reserved
};

struct ExecutorCallbacks {
  /// One per failing instruction (never for dependent errors).
  std::function<void(const plan::Failure &)> onFailure;
  /// The value (or error) for a Fetch.
  std::function<void(const plan::FetchReply &)> onFetch;
  /// A RequestStatus whose earlier work has all finished.
  std::function<void(int64_t instruction)> onStatus;
  /// When set, one event per executed instruction (including each
  /// instruction of a recording call), after it finished on its stream.
  /// Unset, the executor reads no clocks.
  std::function<void(const plan::TraceEvent &)> onTrace;
  /// When set, lines for a debug log (CUDA graph captures and refusals),
  /// from any thread.
  std::function<void(const std::string &)> onDebug;
};

class Executor {
public:
  Executor(ExecutorOptions options, ExecutorCallbacks callbacks);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Registers a program's meshes and streams (its root must match).
  Status declare(const plan::Program &program);
  /// Queues one instruction. Failures are reported through callbacks, never
  /// returned; instructions for meshes without this rank are ignored.
  void submit(const plan::Instruction &instruction);
  /// declare() + submit() of every instruction.
  Status run(const plan::Program &program);
  /// Waits until every queued instruction has finished; false on timeout.
  bool waitIdle(std::chrono::milliseconds timeout);
  /// The process of `rank` failed (the controller says so; any thread, at
  /// once, not in stream order): every collective with it -- queued, or
  /// waiting in a rendezvous -- fails on this rank with a supervision error
  /// naming it, instead of waiting out the timeout. Work without it goes on.
  void rankFailed(int64_t rank, const std::string &reason);

  int64_t rank() const;
  /// Number of refs holding a value or an error on this worker (after
  /// waitIdle; for tests and leak checks).
  size_t liveRefs() const;
  /// Any thread, any time (counters, not a snapshot of one instant).
  CudaGraphStats cudaGraphStats() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_EXECUTOR_H
