//===- Log.h - Minimal leveled logging to stderr ----------------*- C++ -*-===//
//
// Workers' stderr is forwarded to the controller with a rank prefix, so a
// plain line-oriented stderr logger is all the runtime needs. MONARCH_LOG=debug
// enables debug lines.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_UTIL_LOG_H
#define MONARCH_RUNTIME_UTIL_LOG_H

#include <sstream>
#include <string>

namespace monarch::log {

enum class Level { Debug, Info, Warning, Error };

bool enabled(Level level);
void write(Level level, const std::string &line);

template <typename... Args> void at(Level level, const Args &...args) {
  if (!enabled(level))
    return;
  std::ostringstream out;
  (out << ... << args);
  write(level, out.str());
}

template <typename... Args> void debug(const Args &...a) {
  at(Level::Debug, a...);
}
template <typename... Args> void info(const Args &...a) {
  at(Level::Info, a...);
}
template <typename... Args> void warning(const Args &...a) {
  at(Level::Warning, a...);
}
template <typename... Args> void error(const Args &...a) {
  at(Level::Error, a...);
}

} // namespace monarch::log

#endif // MONARCH_RUNTIME_UTIL_LOG_H
