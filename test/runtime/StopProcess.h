//===- StopProcess.h - SIGSTOP a process and wait until it is stopped -*- C++ -*-===//
//
// kill(SIGSTOP) only queues the signal: a proc still running when the next
// message reaches it answers that message, and a test that expects the call
// to find it stuck fails now and then. Tests that stop a proc call
// stopProcess, which returns once every thread of it is in state T.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TEST_RUNTIME_STOPPROCESS_H
#define MONARCH_TEST_RUNTIME_STOPPROCESS_H

#include <chrono>
#include <csignal>
#include <dirent.h>
#include <fstream>
#include <string>
#include <thread>

namespace monarch::test {

/// SIGSTOPs `pid`; true once every thread of it is stopped, false when the
/// signal could not be sent or `bound` passed first.
inline bool stopProcess(int pid, std::chrono::milliseconds bound =
                                     std::chrono::seconds(5)) {
  if (::kill(pid, SIGSTOP) != 0)
    return false;
  auto until = std::chrono::steady_clock::now() + bound;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  while (std::chrono::steady_clock::now() < until) {
    DIR *dir = ::opendir(tasks.c_str());
    if (!dir)
      return false;
    bool all = true;
    while (dirent *entry = ::readdir(dir)) {
      if (entry->d_name[0] == '.')
        continue;
      std::ifstream stat(tasks + "/" + entry->d_name + "/stat");
      std::string line;
      std::getline(stat, line);
      // The state follows the ')' that closes the command name.
      auto close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size() ||
          (line[close + 2] != 'T' && line[close + 2] != 't'))
        all = false;
    }
    ::closedir(dir);
    if (all)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

} // namespace monarch::test

#endif // MONARCH_TEST_RUNTIME_STOPPROCESS_H
