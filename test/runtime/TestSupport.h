//===- TestSupport.h - Shared helpers of the runtime tests ------*- C++ -*-===//
#ifndef MONARCH_TEST_RUNTIME_TESTSUPPORT_H
#define MONARCH_TEST_RUNTIME_TESTSUPPORT_H

#include "monarch/runtime/Monarch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace monarch::test {

/// Options that load the test actors into the workers.
inline SpawnProcsOptions testProcOptions(std::string name = "") {
  SpawnProcsOptions options;
  options.name = std::move(name);
  options.actorLibraries = {MONARCH_TEST_ACTORS_LIB};
  return options;
}

/// Collects supervision events (thread-safe) and waits for them.
class EventLog {
public:
  bool record(const SupervisionEvent &event) {
    std::lock_guard<std::mutex> guard(mu);
    events.push_back(event);
    cv.notify_all();
    return true;
  }
  SupervisionHook hook() {
    return [this](const SupervisionEvent &e) { return record(e); };
  }
  bool waitFor(size_t n,
               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return events.size() >= n; });
  }
  std::vector<SupervisionEvent> snapshot() {
    std::lock_guard<std::mutex> guard(mu);
    return events;
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  std::vector<SupervisionEvent> events;
};

/// Unhandled events in tests are recorded here instead of ending the binary.
EventLog &rootEvents();

} // namespace monarch::test

#endif // MONARCH_TEST_RUNTIME_TESTSUPPORT_H
