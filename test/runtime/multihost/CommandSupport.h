//===- CommandSupport.h - Shell commands and lists for multi-host tests ---===//
//
// The multi-host drivers (netns-hosts.sh, slurm-cluster.sh,
// loopback-gpu-hosts.sh) hand the tests their agents as comma-separated
// environment variables, and the tests run monarch-run through the shell.
//
//===----------------------------------------------------------------------===//

#ifndef MONARCH_TEST_RUNTIME_MULTIHOST_COMMANDSUPPORT_H
#define MONARCH_TEST_RUNTIME_MULTIHOST_COMMANDSUPPORT_H

#include <cstdio>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <utility>
#include <vector>

namespace monarch::test {

/// "a,b,c" -> {"a", "b", "c"}; null or empty -> {}.
inline std::vector<std::string> splitList(const char *text) {
  std::vector<std::string> out;
  std::stringstream in(text ? text : "");
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(item);
  return out;
}

/// Runs `cmd` through the shell; exit status (128 if it did not exit) and
/// output (stdout+stderr).
inline std::pair<int, std::string> runCommand(const std::string &cmd) {
  FILE *pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe)
    return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0)
    out.append(buf, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

} // namespace monarch::test

#endif // MONARCH_TEST_RUNTIME_MULTIHOST_COMMANDSUPPORT_H
