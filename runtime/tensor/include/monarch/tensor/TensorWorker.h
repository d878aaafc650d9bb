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

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_TENSORWORKER_H
