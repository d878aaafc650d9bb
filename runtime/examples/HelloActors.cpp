//===- HelloActors.cpp - The example of docs/runtime.md -------------------===//
//
// A controller that spawns four worker processes, an actor on each, and talks
// to them with every adverb. The program is its own worker binary: started by
// spawnProcs with a bootstrap, it serves actors instead of running main's body.
//
//===----------------------------------------------------------------------===//
#include "monarch/runtime/Monarch.h"
#include "monarch/runtime/proc/Worker.h"

#include <cstdio>
#include <stdexcept>

using namespace std::chrono_literals;

// 1. An actor: a class with endpoints, registered by name.
class Greeter : public monarch::Actor {
public:
  explicit Greeter(std::string greeting) : greeting(std::move(greeting)) {}
  std::string greet(std::string name) {
    return greeting + ", " + name + " from rank " +
           std::to_string(context().rank);
  }
  int64_t square(int64_t x) { return x * x; }
  void explode(std::string why) { throw std::runtime_error(why); }

private:
  std::string greeting;
};

static const bool registered = monarch::ActorClass<Greeter>("Greeter")
                                   .constructor<std::string>()
                                   .endpoint("greet", &Greeter::greet)
                                   .endpoint("square", &Greeter::square)
                                   .endpoint("explode", &Greeter::explode)
                                   .install();

int main() {
  if (monarch::isWorkerProcess())
    return monarch::runWorker();

  // 2. A proc mesh: 2x2 worker processes (this same executable).
  monarch::SpawnProcsOptions options;
  options.workerPath = monarch::currentExecutable();
  auto procs =
      monarch::thisHost().spawnProcs({{"host", 2}, {"gpu", 2}}, options);
  if (!procs.ok()) {
    std::fprintf(stderr, "%s\n", procs.status().toString().c_str());
    return 1;
  }

  // 3. An actor mesh: one Greeter per proc; constructors run before spawn
  //    returns.
  auto greeters = procs->spawn("greeters", "Greeter", std::string("hello"));
  if (!greeters.ok())
    return 1;

  // 4. Adverbs.
  auto future = greeters->call<std::string>("greet", std::string("world"));
  auto all = future.get(10s); // Expected<ValueMesh<std::string>>
  if (!all.ok())
    return 1;
  for (const auto &line : *all)
    std::printf("%s\n", line.c_str());

  auto host1 = greeters->slice("host", 1); // ranks 2 and 3 only
  auto squares = host1->call<int64_t>("square", int64_t{7}).get(10s);
  std::printf("squares on host 1: %lld %lld\n", (long long)(*squares)[0],
              (long long)(*squares)[1]);

  auto one = greeters->choose<int64_t>("square", int64_t{3}).get(10s);
  std::printf("choose: %lld\n", (long long)*one);

  for (auto &f : greeters->stream<int64_t>("square", int64_t{2}))
    std::printf("stream: %lld\n", (long long)*f.get(10s));

  // 5. Errors: a called endpoint that throws returns the error; the actor
  //    lives on.
  auto failed =
      greeters->call<monarch::Unit>("explode", std::string("oops")).get(10s);
  std::printf("call error: %s\n", failed.status().message().c_str());

  // 6. Supervision: a broadcast handler that throws stops its actor; the
  //    owner's hook sees the event (returning true = handled).
  std::mutex mu;
  std::condition_variable cv;
  bool seen = false;
  greeters->supervise([&](const monarch::SupervisionEvent &event) {
    std::printf("supervised: %s\n", event.toString().c_str());
    std::lock_guard<std::mutex> guard(mu);
    seen = true;
    cv.notify_all();
    return true;
  });
  (void)greeters->slice("gpu", 0)->slice("host", 0)->broadcast(
      "explode", std::string("bad broadcast"));
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, 10s, [&] { return seen; });
  }
  auto after = greeters->call<int64_t>("square", int64_t{1}).get(10s);
  std::printf("after: %s\n",
              after.ok() ? "ok" : after.status().message().c_str());

  return procs->stop().isOk() ? 0 : 1;
}
