#include "monarch/runtime/util/Log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace monarch::log {

static Level threshold() {
  static const Level level = [] {
    const char *env = std::getenv("MONARCH_LOG");
    if (env && std::strcmp(env, "debug") == 0)
      return Level::Debug;
    if (env && std::strcmp(env, "error") == 0)
      return Level::Error;
    return Level::Info;
  }();
  return level;
}

bool enabled(Level level) { return level >= threshold(); }

void write(Level level, const std::string &line) {
  static const char *names[] = {"debug", "info", "warning", "error"};
  // One fprintf per line keeps lines whole across threads.
  std::fprintf(stderr, "monarch %s: %s\n", names[static_cast<int>(level)],
               line.c_str());
}

} // namespace monarch::log
