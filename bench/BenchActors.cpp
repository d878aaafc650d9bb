//===- BenchActors.cpp - Actors the runtime benchmarks message ------------===//
#include "monarch/runtime/actor/Actor.h"

namespace {

class BenchEcho : public monarch::Actor {
public:
  std::string echo(std::string s) { return s; }
  int64_t rank() { return context().rank; }
  void absorb(int64_t) { ++count; }
  int64_t received() { return count; }

private:
  int64_t count = 0;
};

const bool registered = monarch::ActorClass<BenchEcho>("BenchEcho")
                            .endpoint("echo", &BenchEcho::echo)
                            .endpoint("rank", &BenchEcho::rank)
                            .endpoint("absorb", &BenchEcho::absorb)
                            .endpoint("received", &BenchEcho::received)
                            .install();

} // namespace
