//===- MultiHostTest.cpp - Proc meshes across hosts in network namespaces -===//
//
// Run by netns-hosts.sh, which gives each of 3 "hosts" its own network
// namespace and address and starts one monarch-host agent per namespace. The
// controller (this process, in the root namespace) attaches to them, builds
// a 3-host x 2-proc mesh, casts to actors, runs a tensor plan with a reduce
// across every rank through monarch-run, and sees a cut link and a killed
// agent as supervision errors naming the host while the other host works on.
//
//===----------------------------------------------------------------------===//

#include "../TestSupport.h"
#include "CommandSupport.h"

#include "monarch/runtime/host/HostAddresses.h"
#include "monarch/runtime/host/HostMesh.h"
#include "monarch/runtime/host/JobSecret.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/tensor/PlanBuilder.h"
#include "monarch/tensor/TempDir.h"

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace monarch;
using namespace std::chrono_literals;
using monarch::test::runCommand;
using monarch::test::splitList;

namespace monarch::test {
EventLog &rootEvents() {
  static EventLog log;
  return log;
}
} // namespace monarch::test

namespace {

/// What netns-hosts.sh set up.
struct TestHosts {
  std::vector<std::string> addrs, names, netns, links, agentPids;
  std::string secretFile;
  bool present() const { return addrs.size() == 3; }
};

const TestHosts &hosts() {
  static TestHosts h = [] {
    TestHosts t;
    t.addrs = splitList(std::getenv("MONARCH_TEST_HOSTS"));
    t.names = splitList(std::getenv("MONARCH_TEST_HOST_NAMES"));
    t.netns = splitList(std::getenv("MONARCH_TEST_NETNS"));
    t.links = splitList(std::getenv("MONARCH_TEST_LINKS"));
    t.agentPids = splitList(std::getenv("MONARCH_TEST_AGENT_PIDS"));
    const char *secret = std::getenv("MONARCH_TEST_SECRET_FILE");
    t.secretFile = secret ? secret : "";
    return t;
  }();
  return h;
}

#define REQUIRE_HOSTS()                                                        \
  if (!hosts().present())                                                      \
  GTEST_SKIP() << "run through test/runtime/multihost/netns-hosts.sh"

host::HostMeshOptions fastOptions() {
  host::HostMeshOptions o;
  o.heartbeatInterval = 200ms;
  o.heartbeatTimeout = 1500ms;
  return o;
}

/// The inode of a network namespace, to tell which host a process is on.
ino_t netnsInode(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

bool waitUntil(std::function<bool()> done, std::chrono::milliseconds bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

bool processGone(int pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

TEST(MultiHost, BadAgentAddressesAndSecretsAreClearErrors) {
  REQUIRE_HOSTS();
  EXPECT_FALSE(host::parseHostList("10.0.0.1").ok());
  EXPECT_FALSE(host::parseHostList("a:1,,b:2").ok());
  auto badPort = host::agentAddress("10.0.0.1:99999");
  ASSERT_FALSE(badPort.ok());
  EXPECT_NE(badPort.status().message().find("bad port"), std::string::npos);
  EXPECT_FALSE(host::secretFromHex("abcd").ok());
  // A secret file readable by others is refused.
  tensor::TempDir tmp("secret");
  std::string path = tmp.file("s");
  ASSERT_TRUE(host::writeSecretFile(path, host::newSecretHex()).isOk());
  EXPECT_TRUE(host::readSecret(path).ok());
  ::chmod(path.c_str(), 0644);
  auto open = host::readSecret(path);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos);
}

TEST(MultiHost, ProcMeshSpansHostsAndActorsAnswerFromEach) {
  REQUIRE_HOSTS();
  auto mesh = host::HostMesh::attach(hosts().addrs, fastOptions());
  ASSERT_TRUE(mesh.ok()) << mesh.status().toString();
  ASSERT_EQ((*mesh)->size(), 3u);
  EXPECT_EQ((*mesh)->shape(), (Shape{{"hosts", 3}}));
  for (size_t h = 0; h < 3; ++h)
    EXPECT_EQ((*mesh)->hostName(h), hosts().names[h]);

  auto procs =
      (*mesh)->spawnProcs({{"gpu", 2}}, test::testProcOptions("mh_procs"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  EXPECT_EQ(procs->size(), 6u);
  EXPECT_EQ(procs->view().sizes(), (std::vector<int64_t>{3, 2}));
  // Rank r runs on host r / 2: in that host's network namespace.
  auto pids = procs->pids();
  ASSERT_EQ(pids.size(), 6u);
  for (int r = 0; r < 6; ++r)
    EXPECT_EQ(netnsInode("/proc/" + std::to_string(pids[r]) + "/ns/net"),
              netnsInode("/run/netns/" + hosts().netns[r / 2]))
        << "rank " << r;

  auto echo = procs->spawn("echo", "Echo");
  ASSERT_TRUE(echo.ok()) << echo.status().toString();
  auto ranks = echo->call<int64_t>("rank").get(10s);
  ASSERT_TRUE(ranks.ok()) << ranks.status().toString();
  for (int r = 0; r < 6; ++r)
    EXPECT_EQ((*ranks)[r], r);
  auto host2 = echo->slice("hosts", 2);
  ASSERT_TRUE(host2.ok());
  auto sums = host2->call<int64_t>("add", int64_t{40}, int64_t{2}).get(10s);
  ASSERT_TRUE(sums.ok()) << sums.status().toString();
  ASSERT_EQ(sums->size(), 2u);
  EXPECT_EQ((*sums)[0], 42);
  auto remotePids = echo->call<int64_t>("pid").get(10s);
  ASSERT_TRUE(remotePids.ok());
  for (int r = 0; r < 6; ++r)
    EXPECT_EQ((*remotePids)[r], pids[r]);

  // A proc dying on a live host: its agent reports the exit status.
  test::EventLog events;
  procs->supervise(events.hook());
  auto victim = echo->slice("hosts", 1);
  ASSERT_TRUE(victim.ok());
  auto one = victim->slice("gpu", 0);
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(one->broadcast("crash", int64_t{0}).isOk());
  ASSERT_TRUE(events.waitFor(1, 5s));
  auto event = events.snapshot().front();
  EXPECT_EQ(event.rank, 2);
  EXPECT_EQ(event.reason,
            "host 'mh1' (" + hosts().addrs[1] + "): exited with code 3");
  EXPECT_TRUE((*mesh)->hostAlive(1));
  EXPECT_TRUE(procs->stop().isOk());
  for (int pid : pids)
    EXPECT_TRUE(waitUntil([&] { return processGone(pid); }, 5s)) << pid;
}

TEST(MultiHost, DetachingKillsTheProcsAndAgentsServeTheNextController) {
  REQUIRE_HOSTS();
  std::vector<int> pids;
  {
    auto mesh = host::HostMesh::attach(hosts().addrs, fastOptions());
    ASSERT_TRUE(mesh.ok()) << mesh.status().toString();
    auto procs =
        (*mesh)->spawnProcs({{"gpu", 1}}, test::testProcOptions("orphans"));
    ASSERT_TRUE(procs.ok()) << procs.status().toString();
    test::EventLog events;
    procs->supervise(events.hook());
    pids = procs->pids();
    mesh->reset(); // the controller goes away with its procs still running
    for (int pid : pids)
      EXPECT_TRUE(waitUntil([&] { return processGone(pid); }, 5s)) << pid;
  }
  auto again = host::HostMesh::attach(hosts().addrs, fastOptions());
  ASSERT_TRUE(again.ok()) << again.status().toString();
  auto procs =
      (*again)->spawnProcs({{"gpu", 1}}, test::testProcOptions("second"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  EXPECT_TRUE(procs->stop().isOk());
}

// Run in a child process by the next test: a controller that attaches,
// spawns one proc per host, prints their pids and waits to be killed.
TEST(MultiHostHelper, HoldProcsUntilKilled) {
  if (!std::getenv("MONARCH_TEST_HELPER"))
    GTEST_SKIP()
        << "helper of MultiHost.AControllerThatDiesTakesItsProcsWithIt";
  REQUIRE_HOSTS();
  auto mesh = host::HostMesh::attach(hosts().addrs, fastOptions());
  ASSERT_TRUE(mesh.ok()) << mesh.status().toString();
  auto procs = (*mesh)->spawnProcs({{"gpu", 1}}, test::testProcOptions("held"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  std::string line = "PIDS";
  for (int pid : procs->pids())
    line += " " + std::to_string(pid);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  std::mutex mu;
  std::condition_variable never;
  std::unique_lock<std::mutex> lock(mu);
  never.wait_for(lock, 60s); // the parent kills this process long before
}

TEST(MultiHost, AControllerThatDiesTakesItsProcsWithIt) {
  REQUIRE_HOSTS();
  // The child: this binary running the helper above.
  std::vector<std::string> envStrings;
  for (char **e = environ; *e; ++e)
    envStrings.emplace_back(*e);
  envStrings.push_back("MONARCH_TEST_HELPER=1");
  std::vector<char *> envp;
  for (auto &e : envStrings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  std::string filter = "--gtest_filter=MultiHostHelper.*";
  char *argv[] = {self.data(), filter.data(), nullptr};
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlives this test
    ::dup2(out[1], STDOUT_FILENO);
    ::execve(self.c_str(), argv, envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (text.find("PIDS") == std::string::npos ||
         text.find('\n', text.find("PIDS")) == std::string::npos) {
    pollfd p{out[0], POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline || ::poll(&p, 1, 1000) < 0)
      break;
    char buf[4096];
    if (p.revents == 0)
      continue;
    ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n <= 0)
      break;
    text.append(buf, n);
  }
  ::close(out[0]);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  size_t at = text.find("PIDS");
  ASSERT_NE(at, std::string::npos) << text;
  std::istringstream in(text.substr(at + 4, text.find('\n', at) - at - 4));
  std::vector<int> pids;
  for (int pid; in >> pid;)
    pids.push_back(pid);
  ASSERT_EQ(pids.size(), 3u) << text;
  for (int pid : pids)
    EXPECT_TRUE(processGone(pid) ||
                waitUntil([&] { return processGone(pid); }, 10s))
        << pid;
  // The agents serve the next controller.
  auto mesh = host::HostMesh::attach(hosts().addrs, fastOptions());
  ASSERT_TRUE(mesh.ok()) << mesh.status().toString();
}

TEST(MultiHost, AgentsServeOneControllerAndOnlyWithTheSecret) {
  REQUIRE_HOSTS();
  auto mesh = host::HostMesh::attach(hosts().addrs, fastOptions());
  ASSERT_TRUE(mesh.ok()) << mesh.status().toString();
  std::string self = host::tcpHostOf(Runtime::global().addr());

  // A second controller (its own runtime, the right secret) is refused
  // while the first is served.
  RuntimeOptions second;
  second.secret = *host::readSecret(hosts().secretFile);
  second.listenAddr = "tcp://" + self + ":0";
  Runtime other(second);
  ASSERT_TRUE(other.start().isOk());
  auto refused =
      host::HostMesh::attach({hosts().addrs[0]}, fastOptions(), &other);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("already serves controller " +
                                            Runtime::global().addr()),
            std::string::npos)
      << refused.status().message();

  // A controller without the secret never gets past the handshake.
  RuntimeOptions stranger;
  stranger.secret = std::string(32, 'x');
  stranger.listenAddr = "tcp://" + self + ":0";
  Runtime intruder(stranger);
  ASSERT_TRUE(intruder.start().isOk());
  host::HostMeshOptions quick = fastOptions();
  quick.requestTimeout = 3s;
  auto denied = host::HostMesh::attach({hosts().addrs[1]}, quick, &intruder);
  ASSERT_FALSE(denied.ok());
  EXPECT_NE(denied.status().message().find("job's secret"), std::string::npos)
      << denied.status().message();
  // The first controller is still served.
  auto procs =
      (*mesh)->spawnProcs({{"gpu", 1}}, test::testProcOptions("still"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  EXPECT_TRUE(procs->stop().isOk());
}

TEST(MultiHost, MonarchRunReducesAcrossAllHosts) {
  REQUIRE_HOSTS();
  tensor::TempDir tmp("mhplan");
  // Every rank's rank, summed over all 6 ranks and over the hosts dim.
  tensor::PlanBuilder b({{"hosts", 3}, {"gpu", 2}});
  plan::TensorMeta scalar;
  scalar.set_dtype(plan::INT64);
  int64_t r = b.rank(0, {"hosts", "gpu"});
  b.fetch(0, b.reduce(0, r, scalar, {}, plan::SUM));
  b.fetch(0, b.reduce(0, r, scalar, {"hosts"}, plan::SUM));
  std::string planPath = tmp.file("reduce.plan");
  std::ofstream(planPath, std::ios::binary) << b.serialize();
  std::string hostsFile = tmp.file("hosts");
  {
    std::ofstream out(hostsFile);
    out << "# the test's agents\n";
    for (const auto &a : hosts().addrs)
      out << a << "\n";
  }
  auto [status, out] = runCommand(
      std::string(MONARCH_RUN_BIN) + " " + planPath + " --hosts-file " +
      hostsFile + " --secret-file " + hosts().secretFile + " --timeout 60");
  EXPECT_EQ(status, 0) << out;
  // Sum over everything: 0+1+...+5 = 15 on every rank; over hosts: the
  // ranks g, 2+g, 4+g of gpu g sum to 6 + 3g.
  for (int rank = 0; rank < 6; ++rank) {
    std::string where = "rank " + std::to_string(rank) +
                        " (hosts=" + std::to_string(rank / 2) +
                        ", gpu=" + std::to_string(rank % 2) + "): ";
    EXPECT_NE(out.find(where + "tensor<i64> 15"), std::string::npos)
        << where << "\n"
        << out;
    EXPECT_NE(
        out.find(where + "tensor<i64> " + std::to_string(6 + 3 * (rank % 2))),
        std::string::npos)
        << where << "\n"
        << out;
  }
}

// Run by slurm-cluster.sh: a real slurmctld and slurmd(s) on this machine.
// salloc gives an allocation; monarch-run --slurm, run inside it, starts
// the agents with srun and runs a plan with a reduce across all ranks.
TEST(Slurm, MonarchRunStartsAgentsWithSrunAndReducesAcrossThem) {
  const char *nodesText = std::getenv("MONARCH_TEST_SLURM_NODES");
  const char *controller = std::getenv("MONARCH_TEST_CONTROLLER_HOST");
  if (!nodesText || !controller)
    GTEST_SKIP() << "run through test/runtime/multihost/slurm-cluster.sh";
  int nodes = std::atoi(nodesText);
  // One node: several agents on it stand in for hosts.
  int perNode = nodes == 1 ? 2 : 1;
  int64_t hostCount = nodes * perNode;
  tensor::TempDir tmp("slurmplan");
  tensor::PlanBuilder b({{"hosts", hostCount}, {"gpu", 2}});
  plan::TensorMeta scalar;
  scalar.set_dtype(plan::INT64);
  int64_t r = b.rank(0, {"hosts", "gpu"});
  b.fetch(0, b.reduce(0, r, scalar, {}, plan::SUM));
  std::string planPath = tmp.file("reduce.plan");
  std::ofstream(planPath, std::ios::binary) << b.serialize();
  auto [rc, out] = runCommand("salloc --nodes=" + std::to_string(nodes) +
                              " --immediate=30 " + MONARCH_RUN_BIN + " " +
                              planPath + " --slurm --controller-host " +
                              controller + " --agents-per-node " +
                              std::to_string(perNode) + " --timeout 60");
  EXPECT_EQ(rc, 0) << out;
  int64_t ranks = hostCount * 2;
  std::string total = std::to_string(ranks * (ranks - 1) / 2);
  for (int64_t rank = 0; rank < ranks; ++rank) {
    std::string line =
        "rank " + std::to_string(rank) + " (hosts=" + std::to_string(rank / 2) +
        ", gpu=" + std::to_string(rank % 2) + "): tensor<i64> " + total;
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  std::printf("slurm: %d node(s), %d agent(s) per node\n", nodes, perNode);
}

// Last: it cuts host 1's link and kills host 2's agent.
TEST(MultiHost, CutLinkAndKilledAgentAreSupervisionErrorsNamingTheHost) {
  REQUIRE_HOSTS();
  auto mesh = host::HostMesh::attach(hosts().addrs, fastOptions());
  ASSERT_TRUE(mesh.ok()) << mesh.status().toString();
  auto procs =
      (*mesh)->spawnProcs({{"gpu", 2}}, test::testProcOptions("victims"));
  ASSERT_TRUE(procs.ok()) << procs.status().toString();
  test::EventLog events;
  procs->supervise(events.hook());
  auto echo = procs->spawn("echo", "Echo");
  ASSERT_TRUE(echo.ok()) << echo.status().toString();
  ASSERT_TRUE(echo->call<int64_t>("rank").get(10s).ok());
  auto pids = procs->pids();

  ASSERT_EQ(std::system(("ip link set " + hosts().links[1] + " down").c_str()),
            0);
  ASSERT_EQ(::kill(std::stoi(hosts().agentPids[2]), SIGKILL), 0);

  // Ranks 2..5 fail: 2 and 3 when host 1 misses heartbeats, 4 and 5 when
  // host 2's agent connection closes.
  ASSERT_TRUE(events.waitFor(4, 10s)) << events.snapshot().size();
  std::map<int64_t, std::string> reasons;
  for (const auto &e : events.snapshot())
    reasons[e.rank] = e.reason;
  ASSERT_EQ(reasons.size(), 4u);
  for (int64_t rank : {2, 3}) {
    EXPECT_NE(reasons[rank].find("host 'mh1' (" + hosts().addrs[1] +
                                 ") lost: no heartbeat"),
              std::string::npos)
        << reasons[rank];
  }
  for (int64_t rank : {4, 5}) {
    EXPECT_NE(reasons[rank].find("host 'mh2' (" + hosts().addrs[2] + ")"),
              std::string::npos)
        << reasons[rank];
  }
  EXPECT_TRUE((*mesh)->hostAlive(0));
  EXPECT_FALSE((*mesh)->hostAlive(1));
  EXPECT_FALSE((*mesh)->hostAlive(2));

  // A call touching a lost host fails naming it; host 0 keeps working.
  auto all = echo->call<int64_t>("rank").get(10s);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), ErrorCode::Supervision);
  EXPECT_NE(all.status().message().find("host 'mh"), std::string::npos)
      << all.status().message();
  auto host0 = echo->slice("hosts", 0);
  ASSERT_TRUE(host0.ok());
  auto ranks = host0->call<int64_t>("rank").get(10s);
  ASSERT_TRUE(ranks.ok()) << ranks.status().toString();
  EXPECT_EQ((*ranks)[0], 0);
  EXPECT_EQ((*ranks)[1], 1);

  // Host 2's procs died with their agent; host 1's agent, cut off from its
  // controller, killed its own after the heartbeat timeout.
  for (int r = 2; r < 6; ++r)
    EXPECT_TRUE(waitUntil([&] { return processGone(pids[r]); }, 10s))
        << "rank " << r;
  EXPECT_FALSE(processGone(pids[0]));
  EXPECT_TRUE(procs->stop().isOk());
}

} // namespace

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  setRootSupervisionHandler(
      [](const SupervisionEvent &e) { test::rootEvents().record(e); });
  if (hosts().present()) {
    // The controller's runtime listens where the namespaces can reach it,
    // with the agents' secret; this must precede its first use.
    auto secret = host::readSecret(hosts().secretFile);
    if (!secret.ok()) {
      std::fprintf(stderr, "%s\n", secret.status().toString().c_str());
      return 1;
    }
    if (Status s = host::listenForHosts(hosts().addrs, *secret); !s.isOk()) {
      std::fprintf(stderr, "%s\n", s.toString().c_str());
      return 1;
    }
  }
  return RUN_ALL_TESTS();
}
