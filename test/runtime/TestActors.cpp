//===- TestActors.cpp - Actor classes the runtime tests spawn -------------===//
//
// Built as a shared library that workers dlopen (SpawnProcsOptions::
// actorLibraries); the controller refers to these classes by name only.
//
//===----------------------------------------------------------------------===//
#include "monarch/runtime/Monarch.h"

#include <chrono>
#include <csignal>
#include <map>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace {

using monarch::Actor;
using monarch::ActorClass;
using monarch::Blob;

class Echo : public Actor {
public:
  Echo() = default;
  std::string echo(std::string s) { return s; }
  int64_t rank() { return context().rank; }
  int64_t add(int64_t a, int64_t b) { return a + b; }
  int64_t pid() { return ::getpid(); }
  int64_t fail(std::string why) { throw std::runtime_error(why); }
  void failBroadcast(std::string why) { throw std::runtime_error(why); }
  int64_t sleepMs(int64_t ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ms;
  }
  void crash(int64_t how) {
    if (how == 0)
      ::_exit(3);
    if (how == 1)
      std::raise(SIGSEGV);
    ::kill(::getpid(), SIGKILL);
  }
  int64_t blobSize(Blob b) { return static_cast<int64_t>(b.buffer.size()); }
  Blob blobEcho(Blob b) { return b; }
  std::vector<int64_t> vec(std::vector<int64_t> v) { return v; }
  /// A reply of `n` bytes in the message's control part (a string value).
  std::string bigString(int64_t n) {
    return std::string(static_cast<size_t>(n), 'x');
  }
  /// The same bytes as a Blob: a payload frame.
  Blob bigBlob(int64_t n) {
    return Blob{monarch::transport::Buffer::fromString(
        std::string(static_cast<size_t>(n), 'x'))};
  }
};

/// Records per-sender sequence numbers and counts order violations.
class Sink : public Actor {
public:
  void record(int64_t sender, int64_t seq) {
    auto &last = lastSeq[sender];
    if (seq != last + 1)
      ++violations;
    last = seq;
    ++count;
  }
  /// Values of one sender must increase (they need not be consecutive).
  void recordIncreasing(int64_t sender, int64_t value) {
    auto it = lastSeq.find(sender);
    if (it != lastSeq.end() && value <= it->second)
      ++violations;
    lastSeq[sender] = value;
    ++count;
  }
  std::map<std::string, int64_t> summary() {
    return {{"count", count},
            {"violations", violations},
            {"senders", static_cast<int64_t>(lastSeq.size())}};
  }

private:
  std::map<int64_t, int64_t> lastSeq;
  int64_t count = 0;
  int64_t violations = 0;
};

/// The constructor's effect must be visible to the first endpoint.
class Constructed : public Actor {
public:
  Constructed(std::string name, int64_t value)
      : label(name + ":" + std::to_string(value) + "@" +
              std::to_string(context().rank)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string describe() { return label; }

private:
  std::string label;
};

class FailingConstructor : public Actor {
public:
  FailingConstructor() { throw std::runtime_error("constructor refused"); }
  int64_t never() { return 0; }
};

/// Counts messages; used by broadcast tests to observe delivery.
class Counter : public Actor {
public:
  explicit Counter(int64_t start) : value(start) {}
  void bump(int64_t by) { value += by; }
  int64_t get() { return value; }

private:
  int64_t value;
};

/// Holds an actor mesh of its own (on procs it spawned) and messages it from
/// its endpoints: actors are clients of other meshes too.
class Relay : public Actor {
public:
  explicit Relay(std::string actorLibrary) {
    monarch::SpawnProcsOptions options;
    options.name = "inner";
    options.actorLibraries = {actorLibrary};
    auto spawned = monarch::thisHost().spawnProcs({{"gpu", 2}}, options);
    if (!spawned.ok())
      throw std::runtime_error(spawned.status().toString());
    procs = std::make_unique<monarch::ProcMesh>(std::move(*spawned));
    auto echo = procs->spawn("innerEcho", "Echo");
    if (!echo.ok())
      throw std::runtime_error(echo.status().toString());
    inner = std::make_unique<monarch::ActorMesh>(std::move(*echo));
  }
  ~Relay() override { (void)procs->stop(); }

  /// Every inner rank's echo of `text`, joined.
  std::string relay(std::string text) {
    auto replies =
        inner->call<std::string>("echo", text).get(std::chrono::seconds(10));
    if (!replies.ok())
      throw std::runtime_error(replies.status().toString());
    std::string joined;
    for (const auto &r : replies->values())
      joined += r + ";";
    return joined;
  }
  /// Fire-and-forget to the inner mesh, then a call that sees its effect.
  int64_t broadcastThenCall(int64_t ms) {
    auto sent = inner->broadcast("sleepMs", ms);
    if (!sent.isOk())
      throw std::runtime_error(sent.toString());
    auto one = inner->slice("gpu", 1);
    if (!one.ok())
      throw std::runtime_error(one.status().toString());
    auto rank = one->callOne<int64_t>("rank").get(std::chrono::seconds(10));
    if (!rank.ok())
      throw std::runtime_error(rank.status().toString());
    return *rank;
  }

private:
  std::unique_ptr<monarch::ProcMesh> procs;
  std::unique_ptr<monarch::ActorMesh> inner;
};

const bool registered =
    ActorClass<Echo>("Echo")
        .endpoint("echo", &Echo::echo)
        .endpoint("rank", &Echo::rank)
        .endpoint("add", &Echo::add)
        .endpoint("pid", &Echo::pid)
        .endpoint("fail", &Echo::fail)
        .endpoint("failBroadcast", &Echo::failBroadcast)
        .endpoint("sleepMs", &Echo::sleepMs)
        .endpoint("crash", &Echo::crash)
        .endpoint("blobSize", &Echo::blobSize)
        .endpoint("blobEcho", &Echo::blobEcho)
        .endpoint("vec", &Echo::vec)
        .endpoint("bigString", &Echo::bigString)
        .endpoint("bigBlob", &Echo::bigBlob)
        .install() &&
    // The same actor as a system actor (as the tensor worker is): failed
    // broadcasts are logged, never stop it.
    ActorClass<Echo>("SystemEcho")
        .endpoint("echo", &Echo::echo)
        .endpoint("rank", &Echo::rank)
        .endpoint("failBroadcast", &Echo::failBroadcast)
        .system()
        .install() &&
    ActorClass<Sink>("Sink")
        .endpoint("record", &Sink::record)
        .endpoint("recordIncreasing", &Sink::recordIncreasing)
        .endpoint("summary", &Sink::summary)
        .install() &&
    ActorClass<Constructed>("Constructed")
        .constructor<std::string, int64_t>()
        .endpoint("describe", &Constructed::describe)
        .install() &&
    ActorClass<FailingConstructor>("FailingConstructor")
        .endpoint("never", &FailingConstructor::never)
        .install() &&
    ActorClass<Relay>("Relay")
        .constructor<std::string>()
        .endpoint("relay", &Relay::relay)
        .endpoint("broadcastThenCall", &Relay::broadcastThenCall)
        .install() &&
    ActorClass<Counter>("Counter")
        .constructor<int64_t>()
        .endpoint("bump", &Counter::bump)
        .endpoint("get", &Counter::get)
        .install();

} // namespace
