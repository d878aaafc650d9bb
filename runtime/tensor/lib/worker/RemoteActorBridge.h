//===- RemoteActorBridge.h - rref from a native tensor worker ---*- C++ -*-===//
//
// A native tensor worker (monarch-tensor-worker) has no Python, so the actors
// of its proc mesh live in Python processes of their own, one per rank, with
// the same root ranks (monarch/_src/actor/procs.py). A call_actor instruction
// (the rref adverb) then carries the route to them (plan.ActorRoute), and this
// bridge calls the rank's actor there:
//
//   worker rank r --ActorCallRequest--> actor of rank k (proc_ranks[k] == r)
//                 <--ActorCallReply----
//
// through the actor's internal "__monarch_rref__" call (worker.py), on the
// stream that runs the instruction. Tensors travel as host copies and come
// back onto this worker's device (a shard on a GPU is copied to the host and
// back, unlike on Python tensor workers, whose actors use it in place). The
// wait is bounded by the worker's timeout; a lost actor process fails the call
// at once (the attached procs watch their links).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_WORKER_REMOTEACTORBRIDGE_H
#define MONARCH_TENSOR_WORKER_REMOTEACTORBRIDGE_H

#include "monarch/runtime/proc/ActorMesh.h"
#include "monarch/tensor/Functions.h"

#include <chrono>
#include <map>
#include <mutex>
#include <string>

namespace monarch::tensor {

class RemoteActorBridge : public ActorBridge {
public:
  /// `rank`: this worker's root rank; `timeout`: how long one call may take.
  RemoteActorBridge(int64_t rank, std::chrono::milliseconds timeout)
      : rank(rank), timeout(timeout) {}

  std::vector<at::Tensor> call(const plan::CallActor &call,
                               const std::vector<c10::IValue> &args) override;

private:
  /// This rank's actor of the route's mesh, attached at its first call.
  ActorMesh actorOf(const plan::CallActor &call);

  const int64_t rank;
  const std::chrono::milliseconds timeout;
  std::mutex mu;
  std::map<std::string, ActorMesh> actors; // by "procs/mesh"
};

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_WORKER_REMOTEACTORBRIDGE_H
