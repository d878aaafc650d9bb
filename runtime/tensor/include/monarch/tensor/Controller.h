//===- Controller.h - Driving tensor workers from one process ---*- C++ -*-===//
//
// The single controller of DESIGN.md §1: spawns a proc mesh of tensor-worker
// processes (one TensorWorker actor each, hosting an Executor), ships
// instructions to them and collects what they report. Torch-free: the
// controller never touches tensor memory, so it links into monarch-run and
// the Python extension without libtorch.
//
//   auto c = Controller::start({.shape = {{"host", 2}, {"gpu", 2}}});
//   (*c)->declare(program);                 // meshes and streams
//   (*c)->submit(program.instructions());   // every worker gets every one
//   while (auto e = (*c)->next(1s)) ...     // fetches, failures, statuses
//
// Each worker executes the instructions whose mesh contains its rank, so a
// whole compiled plan can be sent at once and eager use can send one
// instruction at a time; both go through submit().
//
// Supervision (DESIGN.md §5, as for actor meshes): when a worker dies the
// controller reports it (a ProcFailure event), tells the live workers, and
// keeps serving them. What needs the dead rank fails, with a supervision
// error naming it: its fetches (outstanding ones at once, later ones as they
// are submitted) and every collective with it (on every live member, at
// once). Everything else -- slices without it, values already on live ranks,
// new work on them -- keeps working. A worker silent past the liveness
// deadline (runtime/proc/Liveness.h) is reported unresponsive, and its
// fetches fail until it is heard from again (ProcResponsive). After stop(),
// submit fails at once and next() never waits.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_CONTROLLER_H
#define MONARCH_TENSOR_CONTROLLER_H

#include "monarch/runtime/proc/ProcMesh.h"
#include "monarch/tensor/Status.h"
#include "monarch/tensor/plan.pb.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace monarch::host {
class HostMesh;
}

namespace monarch::tensor {

struct ControllerOptions {
  /// The root proc mesh, e.g. {{"host", 2}, {"gpu", 2}}: one worker each.
  std::vector<std::pair<std::string, int64_t>> shape;
  /// The worker binary; default: $MONARCH_TENSOR_WORKER, else
  /// monarch-tensor-worker beside the running executable, else in the
  /// build's bin/ directory.
  std::string workerPath;
  /// Per-worker CPU tensor memory cap in bytes (0 = none), ExecutorOptions.
  size_t memoryCapBytes = 0;
  /// The workers run CUDA-graph candidates as captured graphs (true) or op
  /// by op (false); unset, each worker's default: on, unless
  /// MONARCH_CUDA_GRAPHS=off is in its environment (docs/plan.md, "CUDA
  /// graphs").
  std::optional<bool> cudaGraphs;
  /// Bound on every wait: spawning, rendezvous, collectives, borrows.
  std::chrono::milliseconds timeout{60000};
  /// Workers report a TraceEvent per executed instruction.
  bool trace = false;
  /// Multi-host: spawn the workers on these hosts. The shape's first dim is
  /// then the host mesh's dim (same name and size); the rest are per host.
  /// Collectives rendezvous through a store the controller serves
  /// (PortStore.h) instead of a local directory (docs/multi-host.md).
  std::shared_ptr<host::HostMesh> hosts;
};

/// One thing a worker (or the proc mesh) reported, in arrival order.
struct ControllerEvent {
  enum class Kind {
    Worker,           ///< `worker` holds a fetch, failure, status or trace
    ProcFailure,      ///< a worker process died; `rank`, `message`: which, how
    ProcUnresponsive, ///< no heartbeat from `rank` for `silentMs`
    ProcResponsive,   ///< `rank` heard from again after `silentMs`
  };
  Kind kind = Kind::Worker;
  plan::WorkerEvent worker;
  int64_t rank = -1;
  std::string message;
  int64_t silentMs = 0;
};

class Controller {
public:
  /// Spawns the workers and waits (bounded) until every one serves.
  static Expected<std::unique_ptr<Controller>> start(ControllerOptions options);
  ~Controller();
  Controller(const Controller &) = delete;
  Controller &operator=(const Controller &) = delete;

  /// Number of workers (the root mesh's size).
  int64_t size() const;
  const ControllerOptions &options() const;

  /// Registers a program's meshes and streams on every worker; its root must
  /// equal the controller's shape. Instructions in `program` are ignored.
  Status declare(const plan::Program &program);
  /// Sends instructions to every live worker, in order after everything
  /// sent before. Failures of instructions are events, not errors here; a
  /// fetch from a failed (or unresponsive) rank is answered at once with a
  /// supervision error (FetchReply.error.supervision). An error means the
  /// workers could not be reached or the controller is stopped.
  Status submit(const std::vector<plan::Instruction> &instructions);
  Status submit(const plan::InstructionBatch &batch);

  /// The next event, or nothing after `timeout` (at once once stopped and
  /// every event was taken).
  std::optional<ControllerEvent> next(std::chrono::milliseconds timeout);

  /// Ranks whose workers died, with the supervision message of each.
  std::map<int64_t, std::string> failedRanks() const;
  /// True once stop() ran (or start's workers are gone).
  bool stopped() const;

  /// Stops every worker (also done by the destructor).
  Status stop();

  /// Process ids of the workers by rank (tests kill one).
  std::vector<int> pids() const;

  /// The workers' proc mesh (none once stopped): the Python frontend spawns
  /// actors on it so that they share a process with their rank's executor.
  std::optional<ProcMesh> procMesh() const;

  struct Impl;

private:
  explicit Controller(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Everything one plan run produced.
struct PlanRunResult {
  std::vector<plan::FetchReply> fetches; ///< in arrival order
  std::vector<plan::Failure> failures;   ///< root failures, per rank
  std::vector<plan::TraceEvent> trace;   ///< with rank in `TraceEvent`
  std::vector<int64_t> traceRanks;       ///< rank of each `trace` entry
  std::vector<std::string> procFailures; ///< dead workers
};

/// Observes a plan run as events arrive (monarch-run prints from these).
struct PlanRunObserver {
  std::function<void(const plan::FetchReply &)> onFetch;
  std::function<void(const plan::Failure &)> onFailure;
  /// `done` of `total` progress marks reached on every worker.
  std::function<void(int64_t done, int64_t total)> onProgress;
  /// A worker went silent or came back (the run waits for it; its fetches
  /// meanwhile fail): the event's message.
  std::function<void(const ControllerEvent &)> onLiveness;
};

/// Declares `program`, submits all of it, then waits until every worker has
/// finished it (a final RequestStatus) or a worker died or `timeout` passed.
/// Progress marks (RequestStatus) are inserted every `progressEvery`
/// top-level instructions (0 = none).
Expected<PlanRunResult> runPlan(Controller &controller,
                                const plan::Program &program,
                                const PlanRunObserver &observer = {},
                                int64_t progressEvery = 0);

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_CONTROLLER_H
