//===- Supervision.h - Failure events and their owners ----------*- C++ -*-===//
//
// Actors and procs form a tree owned by the creator: an actor mesh is owned by
// the proc mesh it was spawned on, a proc mesh by the controller (the root).
// A failure becomes a SupervisionEvent delivered to the nearest owner's hook;
// a hook returning true has handled it, false passes it up. At the root an
// unhandled event fails the controller program with the event's message
// (tests may install their own root handler).
//
// Hooks run on the runtime's io thread: they must be quick and must not block.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_SUPERVISION_SUPERVISION_H
#define MONARCH_RUNTIME_SUPERVISION_SUPERVISION_H

#include <cstdint>
#include <functional>
#include <string>

namespace monarch {

/// What happened to the rank (proc/Liveness.h for the last two).
enum class SupervisionKind {
  Failed,       ///< died, stopped, or its actor stopped: for good
  Unresponsive, ///< no heartbeat for `silentMs`; calls to it fail meanwhile
  Responsive,   ///< heard from again after `silentMs`; calls work again
};

struct SupervisionEvent {
  std::string mesh;   ///< the actor mesh or proc mesh that failed
  int64_t rank = -1;  ///< its rank in that mesh
  std::string reason; ///< what happened ("killed by signal 9 (Killed)")
  SupervisionKind kind = SupervisionKind::Failed;
  /// Unresponsive / Responsive: how long the proc had been silent.
  int64_t silentMs = 0;
  /// "supervision: mesh 'trainers' rank 2 failed: ...", "... unresponsive:
  /// ...", "... responsive again: ...".
  std::string toString() const;
};

/// True when the hook handled the event.
using SupervisionHook = std::function<bool(const SupervisionEvent &)>;
using RootSupervisionHandler = std::function<void(const SupervisionEvent &)>;

/// Replaces the root handler; the default prints the event and exits(1),
/// except for a Responsive event, which it only prints: a proc coming back
/// fails nothing.
void setRootSupervisionHandler(RootSupervisionHandler handler);
/// The root of every supervision tree.
void raiseToRoot(const SupervisionEvent &event);

} // namespace monarch

#endif // MONARCH_RUNTIME_SUPERVISION_SUPERVISION_H
