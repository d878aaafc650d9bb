#include "TestSupport.h"

#include "monarch/runtime/proc/Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace monarch::test {
EventLog &rootEvents() {
  static EventLog log;
  return log;
}

/// MONARCH_TEST_CONTROLLER=1: this binary is a controller for a test to
/// kill (ReliabilityTest's Cleanup tests). It spawns two procs, prints its
/// private directory and the procs' pids, and waits to be killed.
int controllerHelper() {
  auto procs = thisHost().spawnProcs({{"gpu", 2}}, testProcOptions("victim"));
  if (!procs.ok()) {
    std::fprintf(stderr, "helper: %s\n", procs.status().toString().c_str());
    return 2;
  }
  std::printf("dir %s\n", Runtime::global().privateDir().c_str());
  for (int pid : procs->pids())
    std::printf("pid %d\n", pid);
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}
} // namespace monarch::test

int main(int argc, char **argv) {
  if (const char *helper = std::getenv("MONARCH_TEST_CONTROLLER");
      helper && std::string(helper) == "1") {
    ::unsetenv("MONARCH_TEST_CONTROLLER");
    return monarch::test::controllerHelper();
  }
  testing::InitGoogleTest(&argc, argv);
  monarch::setRootSupervisionHandler([](const monarch::SupervisionEvent &e) {
    monarch::test::rootEvents().record(e);
  });
  return RUN_ALL_TESTS();
}
