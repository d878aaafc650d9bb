//===- TensorWorker.h - The tensor-worker actor -----------------*- C++ -*-===//
//
// One TensorWorker actor per proc hosts that rank's Executor (DESIGN.md §5
// "Tensor worker"). Endpoints:
//   declare(plan::Program)   call: registers the program's meshes/streams
//   submit(Blob)             broadcast: a serialized plan::InstructionBatch
//   rank_failed(rank, why)   broadcast: that rank's process failed; the
//                            collectives that need it fail at once
// It is a system actor: a broadcast that fails (malformed, unknown endpoint)
// is logged and the worker serves on.
// Everything the executor reports (fetches, failures, statuses, trace) goes
// to the controller's port as plan::WorkerEvent messages, in the order the
// streams produce it, with no call waiting for it.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_TENSORWORKER_H
#define MONARCH_TENSOR_TENSORWORKER_H

namespace monarch::plan {
class WorkerConfig;
}

namespace monarch::tensor {

/// The actor class name the controller spawns.
inline constexpr const char *kTensorWorkerClass = "monarch.TensorWorker";

/// Registers the actor class in this process (idempotent). Worker binaries
/// call it before runWorker(); a static initializer in a static library
/// would be dropped by the linker.
void registerTensorWorker();

/// Keeps freed host memory in the process for reuse instead of giving it
/// back to the kernel after every op (HostAllocator.cpp). Worker processes
/// call it at start.
void tuneHostAllocator();

/// Whether a worker runs the plan's CUDA-graph candidates as captured
/// graphs: the controller's word when it gave one (monarch-run
/// --cuda-graphs on|off), else MONARCH_CUDA_GRAPHS=on|off in this process's
/// environment, else on (docs/plan.md, "CUDA graphs"). Any other value of
/// the variable is one warning and the default.
bool cudaGraphsSetting(const plan::WorkerConfig &config);

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_TENSORWORKER_H
