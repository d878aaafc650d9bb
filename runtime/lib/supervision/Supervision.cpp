#include "monarch/runtime/supervision/Supervision.h"

#include "monarch/runtime/proc/Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace monarch {

namespace {
std::mutex rootMu;
RootSupervisionHandler &rootHandler() {
  static RootSupervisionHandler handler;
  return handler;
}
} // namespace

std::string SupervisionEvent::toString() const {
  const char *what = kind == SupervisionKind::Unresponsive ? " unresponsive: "
                     : kind == SupervisionKind::Responsive ? " responsive again: "
                                                           : " failed: ";
  return "supervision: mesh '" + mesh + "' rank " + std::to_string(rank) +
         what + reason;
}

void setRootSupervisionHandler(RootSupervisionHandler handler) {
  std::lock_guard<std::mutex> guard(rootMu);
  rootHandler() = std::move(handler);
}

void raiseToRoot(const SupervisionEvent &event) {
  RootSupervisionHandler handler;
  {
    std::lock_guard<std::mutex> guard(rootMu);
    handler = rootHandler();
  }
  if (handler)
    return handler(event);
  if (event.kind == SupervisionKind::Responsive) {
    std::fprintf(stderr, "monarch: %s\n", event.toString().c_str());
    return;
  }
  std::fprintf(stderr, "monarch: unhandled %s\n", event.toString().c_str());
  std::fflush(stderr);
  // Children would die with us anyway (PR_SET_PDEATHSIG); ending and reaping
  // them here leaves no zombies behind.
  Runtime::fatalCleanup();
  // Static destructors would race the runtime's threads; end right here.
  std::_Exit(1);
}

} // namespace monarch
