//===- OnOff.h - An on/off switch read from the environment -----*- C++ -*-===//
//
// Usage: `bool graphs = onOffFromEnv("MONARCH_CUDA_GRAPHS", true,
//                                    "CUDA graphs stay on");`
//
// Runtime switches (MONARCH_CUDA_GRAPHS, MONARCH_CUDA_IPC) take "on" or
// "off"; unset means the default, and anything else gets one warning that
// says what happens instead (`otherwise`), never a silent guess.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_UTIL_ONOFF_H
#define MONARCH_RUNTIME_UTIL_ONOFF_H

#include "monarch/runtime/util/Log.h"

#include <cstdlib>
#include <string>

namespace monarch {

inline bool onOffFromEnv(const char *name, bool byDefault,
                         const char *otherwise) {
  const char *env = std::getenv(name);
  if (!env)
    return byDefault;
  std::string v(env);
  if (v == "on" || v == "off")
    return v == "on";
  log::warning(name, "=", v, " is neither on nor off; ", otherwise);
  return byDefault;
}

} // namespace monarch

#endif // MONARCH_RUNTIME_UTIL_ONOFF_H
