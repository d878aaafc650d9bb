//===- InProcessLauncher.h - Procs inside this process ---------*- C++ -*-===//
//
// A ProcLauncher whose procs are a Runtime plus a ProcServer inside the
// calling process, listening on inproc:// addresses: the full actor path
// (router, mailbox, TBB arena, replies) without a process boundary. Used for
// in-process benchmarks and tests; the bootstrap's listen address is replaced
// by inproc://0. Such a proc "exits" when killed or destroyed.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_INPROCESSLAUNCHER_H
#define MONARCH_RUNTIME_PROC_INPROCESSLAUNCHER_H

#include "monarch/runtime/proc/ProcLauncher.h"

namespace monarch {

class InProcessLauncher : public ProcLauncher {
public:
  Expected<std::unique_ptr<LaunchedProc>>
  launch(const ProcLaunchSpec &spec) override;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_INPROCESSLAUNCHER_H
