//===- monarch-host - The host agent of multi-host jobs -------------------===//
//
//   monarch-host --listen tcp://IP:PORT --secret-file PATH|- [--name NAME]
//                [--advertise-host HOST | --reachable-from IP]
//                [--name-from-slurm]
//
// Serves one controller at a time (monarch/runtime/host/HostAgent.h): starts
// worker procs when asked, reports their exits, and kills them when the
// controller goes away. The job secret is read from a file only its owner
// can read, or from stdin ("-"), never from the command line. Once serving
// it prints one line,
//
//   monarch-host: host 'NAME' serving on tcp://IP:PORT
//
// which launchers (monarch-run --slurm, the tests) read to learn the address.
// SIGTERM, SIGINT and SIGHUP end it, killing its procs.
//
//===----------------------------------------------------------------------===//
#include "monarch/runtime/host/HostAddresses.h"
#include "monarch/runtime/host/HostAgent.h"
#include "monarch/runtime/host/JobSecret.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace monarch;

/// $SLURMD_NODENAME, with ".LOCALID" when the step runs several agents per
/// node (each is a host of the mesh).
static std::string slurmTaskName() {
  const char *node = std::getenv("SLURMD_NODENAME");
  std::string name = node && *node ? node : "";
  const char *tasks = std::getenv("SLURM_NTASKS");
  const char *nodes = std::getenv("SLURM_NNODES");
  const char *local = std::getenv("SLURM_LOCALID");
  if (tasks && nodes && local && std::atoi(tasks) > std::atoi(nodes))
    name += (name.empty() ? "" : ".") + std::string(local);
  return name;
}

static int usage(const std::string &why) {
  if (!why.empty())
    std::fprintf(stderr, "monarch-host: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: monarch-host --listen tcp://IP:PORT --secret-file "
               "PATH|- [--name NAME]\n"
               "                    [--advertise-host HOST | "
               "--reachable-from IP]\n"
               "                    [--name-from-slurm]\n");
  return 2;
}

int main(int argc, char **argv) {
  host::HostAgentOptions options;
  std::string secretPath, reachableFrom;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    if (a == "--help" || a == "-h")
      return usage(""), 0;
    bool ok = true;
    if (a == "--listen")
      ok = value(options.listenAddr);
    else if (a == "--secret-file")
      ok = value(secretPath);
    else if (a == "--name")
      ok = value(options.name);
    else if (a == "--advertise-host")
      ok = value(options.advertiseHost);
    else if (a == "--reachable-from")
      ok = value(reachableFrom);
    else if (a == "--name-from-slurm")
      options.name = slurmTaskName();
    else
      return usage("unknown argument " + a);
    if (!ok)
      return usage(a + " needs a value");
  }
  if (options.listenAddr.empty())
    return usage("--listen is required");
  if (secretPath.empty())
    return usage("--secret-file is required (a 0600 file, or - for stdin)");
  auto secret = host::readSecret(secretPath);
  if (!secret.ok())
    return usage(secret.status().message());
  options.secret = *secret;
  if (!reachableFrom.empty()) {
    auto ip = host::resolveHost(reachableFrom);
    auto local = ip.ok() ? host::localAddressToward(*ip) : ip;
    if (!local.ok())
      return usage("--reachable-from: " + local.status().message());
    options.advertiseHost = *local;
  }

  // Block the ending signals before any thread exists; main waits for them.
  sigset_t ending;
  sigemptyset(&ending);
  sigaddset(&ending, SIGTERM);
  sigaddset(&ending, SIGINT);
  sigaddset(&ending, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &ending, nullptr);

  host::HostAgent agent(options);
  if (Status s = agent.start(); !s.isOk()) {
    std::fprintf(stderr, "monarch-host: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("monarch-host: host '%s' serving on %s\n", agent.name().c_str(),
              agent.addr().c_str());
  std::fflush(stdout);
  timespec tick{1, 0};
  for (;;) {
    int sig = sigtimedwait(&ending, nullptr, &tick);
    if (sig > 0) {
      std::fprintf(stderr, "monarch-host: signal %d, stopping\n", sig);
      break;
    }
    if (agent.waitForStop(std::chrono::milliseconds(0)))
      break;
  }
  return 0;
}
