//===- Actor.h - Defining actor classes with named endpoints ----*- C++ -*-===//
//
// An actor is a C++ object whose public methods are exposed as endpoints:
//
//   class Counter : public monarch::Actor {
//   public:
//     explicit Counter(int64_t start) : value(start) {}
//     int64_t add(int64_t x) { return value += x; }
//   private:
//     int64_t value;
//   };
//   static const bool registered = monarch::ActorClass<Counter>("Counter")
//       .constructor<int64_t>()
//       .endpoint("add", &Counter::add)
//       .install();
//
// Arguments and results go through ValueCodec (Value.h). The runtime runs one
// endpoint at a time per actor, in arrival order, on the process's TBB arena;
// the constructor runs before the first endpoint.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_ACTOR_ACTOR_H
#define MONARCH_RUNTIME_ACTOR_ACTOR_H

#include "monarch/runtime/actor/Value.h"

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

namespace monarch {

/// Where an actor lives; set before its constructor runs.
struct ActorContext {
  std::string mesh;  ///< actor mesh name
  uint32_t rank = 0; ///< rank in the actor mesh
  uint32_t procRank = 0;
  std::string procId;
};

class Actor {
public:
  virtual ~Actor() = default;
  /// Valid from inside the constructor on.
  const ActorContext &context() const { return *currentContext(); }

  /// The context of the actor being constructed or run on this thread.
  static const ActorContext *currentContext();
  static void setCurrentContext(const ActorContext *context);

  /// For classes with ownThread() only: called on the actor's thread when
  /// its mailbox is empty, so that the actor can run work of its own between
  /// messages (the Python actor's asyncio tasks). It must return soon after
  /// wake() is called -- from any thread, when a message arrives -- and
  /// returns at once if it has nothing to do. Runs under the actor's context.
  virtual void idle() {}
  /// Makes a running idle() return; thread-safe, never blocks.
  virtual void wake() {}
};

/// Type-erased actor class: a factory plus endpoint handlers. Handlers throw
/// on failure (caught by the runtime where they run).
struct ActorClassInfo {
  using Factory = std::function<std::unique_ptr<Actor>(const proto::Value &,
                                                       const PayloadList &)>;
  using Handler = std::function<void(
      Actor &, const proto::Value &args, const PayloadList &argPayloads,
      proto::Value &result, PayloadList &resultPayloads)>;
  std::string name;
  Factory factory;
  std::unordered_map<std::string, Handler> endpoints;
  /// A system actor (the tensor worker): the mesh is unusable without it,
  /// so a fire-and-forget message that fails -- malformed, unknown endpoint,
  /// a handler that throws -- is logged and the actor serves on, where a
  /// user actor stops (Monarch's semantics for user code).
  bool system = false;
  /// The actor runs on one thread of its own for its whole life -- its
  /// constructor, every handler and its destructor -- instead of on the
  /// process's TBB arena: for actors bound to thread-affine state (a Python
  /// thread state, thread-locals that user code sets in a constructor).
  /// Messages still run one at a time in arrival order; the thread polls
  /// for the next one as a drain task does (ActorCell.h).
  bool ownThread = false;
};

/// Process-wide registry of actor classes by name.
class ActorRegistry {
public:
  static ActorRegistry &instance();
  /// False if a class of that name exists already.
  bool add(ActorClassInfo info);
  const ActorClassInfo *find(const std::string &name) const;

private:
  std::unordered_map<std::string, std::unique_ptr<ActorClassInfo>> classes;
};

/// Builder for a typed actor class.
template <typename A> class ActorClass {
  static_assert(std::is_base_of_v<Actor, A>, "actors derive from Actor");

public:
  explicit ActorClass(std::string name) { info.name = std::move(name); }

  /// The constructor arguments spawn() passes.
  template <typename... Args> ActorClass &constructor() {
    info.factory = [](const proto::Value &args, const PayloadList &payloads) {
      auto decoded = decodeArgs<Args...>(args, payloads);
      return std::apply(
          [](auto &&...a) -> std::unique_ptr<Actor> {
            return std::make_unique<A>(std::move(a)...);
          },
          std::move(decoded));
    };
    return *this;
  }

  template <typename R, typename... Args>
  ActorClass &endpoint(const std::string &name, R (A::*method)(Args...)) {
    info.endpoints[name] =
        makeHandler<R, Args...>([method](A &self, auto &&...a) -> R {
          return (self.*method)(std::forward<decltype(a)>(a)...);
        });
    return *this;
  }
  template <typename R, typename... Args>
  ActorClass &endpoint(const std::string &name, R (A::*method)(Args...) const) {
    info.endpoints[name] =
        makeHandler<R, Args...>([method](A &self, auto &&...a) -> R {
          return (self.*method)(std::forward<decltype(a)>(a)...);
        });
    return *this;
  }

  /// Marks the class a system actor (ActorClassInfo::system).
  ActorClass &system() {
    info.system = true;
    return *this;
  }

  /// Gives every actor of the class a thread of its own
  /// (ActorClassInfo::ownThread).
  ActorClass &ownThread() {
    info.ownThread = true;
    return *this;
  }

  /// Registers the class; returns true so it can initialize a static.
  bool install() {
    if constexpr (std::is_default_constructible_v<A>)
      if (!info.factory)
        constructor<>();
    return ActorRegistry::instance().add(std::move(info));
  }

private:
  template <typename R, typename... Args, typename Call>
  static ActorClassInfo::Handler makeHandler(Call call) {
    return [call](Actor &actor, const proto::Value &args,
                  const PayloadList &argPayloads, proto::Value &result,
                  PayloadList &resultPayloads) {
      auto decoded = decodeArgs<Args...>(args, argPayloads);
      auto &self = static_cast<A &>(actor);
      if constexpr (std::is_void_v<R>) {
        std::apply([&](auto &&...a) { call(self, std::move(a)...); },
                   std::move(decoded));
        result.set_null(true);
      } else {
        R value = std::apply(
            [&](auto &&...a) -> R { return call(self, std::move(a)...); },
            std::move(decoded));
        encodeValue<std::decay_t<R>>(value, result, resultPayloads);
      }
    };
  }

  ActorClassInfo info;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_ACTOR_ACTOR_H
