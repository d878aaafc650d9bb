#include "TestSupport.h"

namespace monarch::test {
EventLog &rootEvents() {
  static EventLog log;
  return log;
}
} // namespace monarch::test

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  monarch::setRootSupervisionHandler([](const monarch::SupervisionEvent &e) {
    monarch::test::rootEvents().record(e);
  });
  return RUN_ALL_TESTS();
}
