#include "monarch/runtime/actor/Actor.h"

#include <mutex>

namespace monarch {

namespace {
thread_local const ActorContext *threadContext = nullptr;
std::mutex registryMutex;
} // namespace

const ActorContext *Actor::currentContext() { return threadContext; }
void Actor::setCurrentContext(const ActorContext *context) {
  threadContext = context;
}

ActorRegistry &ActorRegistry::instance() {
  static ActorRegistry registry;
  return registry;
}

bool ActorRegistry::add(ActorClassInfo info) {
  std::lock_guard<std::mutex> guard(registryMutex);
  std::string name = info.name;
  return classes
      .emplace(name, std::make_unique<ActorClassInfo>(std::move(info)))
      .second;
}

const ActorClassInfo *ActorRegistry::find(const std::string &name) const {
  std::lock_guard<std::mutex> guard(registryMutex);
  auto it = classes.find(name);
  return it == classes.end() ? nullptr : it->second.get();
}

} // namespace monarch
