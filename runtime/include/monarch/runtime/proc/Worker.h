//===- Worker.h - The worker process's main ---------------------*- C++ -*-===//
//
// A worker reads its Bootstrap from the pipe named by $MONARCH_BOOTSTRAP_FD,
// loads the actor libraries it lists, listens, reports ProcReady to its parent
// and serves until StopProc arrives or its parent goes away.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_WORKER_H
#define MONARCH_RUNTIME_PROC_WORKER_H

namespace monarch {

/// True when this process was started as a worker (a bootstrap is waiting).
bool isWorkerProcess();
/// Serves as a worker; returns the process exit code.
int runWorker();

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_WORKER_H
