#include "monarch/runtime/host/SlurmAgents.h"

#include "monarch/runtime/proc/ProcLauncher.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace monarch::host {

namespace {

int envInt(const char *name, int fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

/// "3: monarch-host: host 'n1' serving on tcp://10.0.0.2:4000" -> task 3.
bool parseReady(const std::string &line, int &task, std::string &addr) {
  static const std::string marker = "monarch-host: host '";
  size_t colon = line.find(':');
  size_t at = line.find(marker);
  size_t on = line.find("' serving on ");
  if (colon == std::string::npos || at == std::string::npos ||
      on == std::string::npos || at < colon)
    return false;
  std::string label = line.substr(0, colon);
  size_t b = label.find_first_not_of(' ');
  if (b == std::string::npos)
    return false;
  char *end = nullptr;
  long t = std::strtol(label.c_str() + b, &end, 10);
  if (*end)
    return false;
  task = static_cast<int>(t);
  addr = line.substr(on + 13);
  while (!addr.empty() && (addr.back() == '\r' || addr.back() == ' '))
    addr.pop_back();
  return true;
}

} // namespace

Expected<std::unique_ptr<SlurmAgents>>
SlurmAgents::start(const SlurmAgentsOptions &options) {
  if (!std::getenv("SLURM_JOB_ID"))
    return Status(ErrorCode::Invalid,
                  "--slurm: not inside a SLURM allocation ($SLURM_JOB_ID is "
                  "unset); run it from an sbatch script or salloc");
  int nodes = envInt("SLURM_JOB_NUM_NODES", envInt("SLURM_NNODES", 0));
  if (nodes <= 0)
    return Status(ErrorCode::Invalid,
                  "--slurm: $SLURM_JOB_NUM_NODES is not set");
  int tasks = nodes * options.agentsPerNode;
  std::vector<std::string> args = {"srun",
                                   "--nodes=" + std::to_string(nodes),
                                   "--ntasks=" + std::to_string(tasks),
                                   "--ntasks-per-node=" +
                                       std::to_string(options.agentsPerNode),
                                   "--input=all",
                                   "--label",
                                   "--kill-on-bad-exit=1",
                                   options.agentPath,
                                   "--listen",
                                   "tcp://0.0.0.0:0",
                                   "--secret-file",
                                   "-",
                                   "--reachable-from",
                                   options.controllerHost,
                                   "--name-from-slurm"};
  std::vector<char *> argv;
  for (auto &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
    return Status(ErrorCode::Internal,
                  std::string("pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0)
    return Status(ErrorCode::Internal,
                  std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    closeDescriptorsFrom(STDERR_FILENO + 1);
    ::execvp("srun", argv.data());
    std::fprintf(stderr, "monarch-run: cannot run srun: %s\n",
                 std::strerror(errno));
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  std::unique_ptr<SlurmAgents> self(new SlurmAgents());
  self->srunPid = pid;
  self->outFd = out[0];
  std::string line = options.secretHex + "\n";
  bool wrote = ::write(in[1], line.data(), line.size()) ==
               static_cast<ssize_t>(line.size());
  ::close(in[1]);
  if (!wrote)
    return Status(ErrorCode::Closed, "--slurm: srun did not take the secret");

  // Read until every agent reported its address (or srun ended / timeout).
  std::map<int, std::string> found;
  std::string pending, seen;
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  while (static_cast<int>(found.size()) < tasks) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Status(ErrorCode::Timeout,
                    "--slurm: " + std::to_string(found.size()) + " of " +
                        std::to_string(tasks) + " host agents reported in " +
                        std::to_string(options.timeout.count()) +
                        " ms; srun said:\n" + seen);
    pollfd p{self->outFd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      continue;
    char buf[4096];
    ssize_t n = ::read(self->outFd, buf, sizeof(buf));
    if (n <= 0)
      return Status(ErrorCode::Closed,
                    "--slurm: srun ended before every host agent reported "
                    "(" +
                        std::to_string(found.size()) + " of " +
                        std::to_string(tasks) + "); srun said:\n" + seen);
    pending.append(buf, n);
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string l = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      int task;
      std::string addr;
      if (parseReady(l, task, addr) && task >= 0 && task < tasks)
        found[task] = addr;
      else {
        std::fprintf(stdout, "%s\n", l.c_str());
        if (seen.size() < 8192)
          seen += l + "\n";
      }
    }
  }
  std::fflush(stdout);
  for (auto &[task, addr] : found)
    self->addrs.push_back(addr);
  // Keep draining srun's output (the workers' logs) so nothing blocks on a
  // full pipe.
  int fd = self->outFd;
  std::string rest = pending;
  self->forwarder = std::thread([fd, rest] {
    if (!rest.empty())
      std::fwrite(rest.data(), 1, rest.size(), stdout);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
      if (n > 0) {
        std::fwrite(buf, 1, n, stdout);
        std::fflush(stdout);
      }
  });
  return self;
}

SlurmAgents::~SlurmAgents() {
  if (srunPid > 0) {
    // srun forwards SIGTERM to the agents, which end their procs; a step
    // that does not end within 10 s is killed (slurmd cleans up after it).
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, srunPid, 0));
    ::kill(srunPid, SIGTERM);
    pollfd p{pidfd, POLLIN, 0};
    if (pidfd < 0 || ::poll(&p, 1, 10000) <= 0)
      ::kill(srunPid, SIGKILL);
    if (pidfd >= 0)
      ::close(pidfd);
    int status;
    ::waitpid(srunPid, &status, 0);
  }
  if (forwarder.joinable())
    forwarder.join();
  if (outFd >= 0)
    ::close(outFd);
}

} // namespace monarch::host
