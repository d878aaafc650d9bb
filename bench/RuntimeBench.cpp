//===- RuntimeBench.cpp - Actor runtime benchmarks with same-run baselines ===//
//
// Prints a markdown table: every figure next to its baseline measured in the
// same run, and their ratio. Each figure is the median of --reps runs.
//
//   build/bin/monarch-runtime-bench [--reps 5]
//
// Figures:
//  * actor ping-pong (callOne of a 32-byte string echo) in-process, over Unix
//    sockets and over TCP loopback; baseline: a raw socket ping-pong of the
//    same request/reply byte counts (socketpair between threads for the
//    in-process case, a forked echo child for Unix and TCP);
//  * small-message throughput to an actor in another process (broadcast);
//    baseline: the same bytes written to a raw Unix socket, one write each;
//  * cast to N actors on 4 procs and collect all replies (call), N=16..1024;
//    baseline: one callOne round trip to one actor of the same procs.
//
//===----------------------------------------------------------------------===//
#include "RawSocket.h"

#include "monarch/runtime/Monarch.h"
#include "monarch/runtime/proc/InProcessLauncher.h"
#include "monarch/runtime/transport/Frame.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace monarch;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

int reps = 5;
/// --no-sleepy: skip the Unix figure with polling off everywhere.
bool sleepy = true;
/// --only: run just the figures whose section names contain this text
/// (inproc, unix, tcp, throughput, cast); empty runs all.
std::string only;

bool wanted(const char *section) {
  return only.empty() || std::string(section).find(only) != std::string::npos;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double repeat(const std::function<double()> &fn) {
  std::vector<double> runs;
  for (int i = 0; i < reps; ++i)
    runs.push_back(fn());
  return median(runs);
}

[[noreturn]] void die(const std::string &what, const Status &s) {
  std::fprintf(stderr, "bench: %s: %s\n", what.c_str(), s.toString().c_str());
  std::exit(1);
}

template <typename T> T check(Expected<T> e, const std::string &what) {
  if (!e.ok())
    die(what, e.status());
  return std::move(*e);
}

SpawnProcsOptions benchOptions(std::string transport = "unix") {
  SpawnProcsOptions o;
  o.actorLibraries = {MONARCH_BENCH_ACTORS_LIB};
  o.transport = std::move(transport);
  return o;
}

/// --percentiles: also print each ping-pong run's round-trip percentiles
/// (to stderr), which tell steady hops from occasional sleeps.
bool percentiles = false;

/// Mean callOne round trip (µs) of a 32-byte echo.
double actorPingPongUs(const ActorMesh &one, int iterations) {
  std::string payload(32, 'p');
  for (int i = 0; i < 200; ++i) // warm up links and caches
    check(one.callOne<std::string>("echo", payload).get(10s), "warm up");
  std::vector<double> each;
  if (percentiles)
    each.reserve(iterations);
  auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    auto sent = percentiles ? Clock::now() : Clock::time_point();
    check(one.callOne<std::string>("echo", payload).get(10s), "ping");
    if (percentiles)
      each.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - sent)
              .count());
  }
  std::chrono::duration<double, std::micro> took = Clock::now() - start;
  if (percentiles) {
    std::sort(each.begin(), each.end());
    auto at = [&](double q) { return each[size_t(q * (each.size() - 1))]; };
    std::fprintf(stderr,
                 "  round trip µs: min %.1f p10 %.1f p50 %.1f p90 %.1f "
                 "p99 %.1f max %.1f\n",
                 each.front(), at(0.1), at(0.5), at(0.9), at(0.99),
                 each.back());
  }
  return took.count() / iterations;
}

/// Wire sizes of the runtime's echo request and reply, so the raw baseline
/// moves the same bytes.
std::pair<size_t, size_t> echoWireSizes(const std::string &ctlAddr,
                                        const std::string &procAddr) {
  transport::Message req;
  req.envelope.set_sender("controller@" + ctlAddr);
  req.envelope.set_seq(1000);
  auto *c = req.envelope.mutable_cast();
  c->set_mesh("e");
  c->set_endpoint("echo");
  c->mutable_args()->mutable_list()->add_items()->set_string_value(
      std::string(32, 'p'));
  c->set_reply_mode(proto::REPLY_MERGED);
  c->mutable_reply_to()->set_addr(ctlAddr);
  c->mutable_reply_to()->set_port(1000);
  c->set_fanout(16);
  c->mutable_here()->set_addr(procAddr);
  c->mutable_here()->add_locals(0);
  c->mutable_here()->set_seq(1000);
  transport::Message rep;
  rep.envelope.set_sender("procs0/0@" + procAddr);
  rep.envelope.set_dest_port(1000);
  auto *r = rep.envelope.mutable_cast_reply()->add_results();
  r->set_rank(0);
  r->mutable_value()->set_string_value(std::string(32, 'p'));
  return {transport::encodeMessage(req)->totalBytes(),
          transport::encodeMessage(rep)->totalBytes()};
}

void row(const std::string &what, const std::string &unit, double value,
         const std::string &baselineWhat, double baseline, bool lowerIsBetter) {
  double ratio = value / baseline;
  std::printf("| %s | %.1f %s | %s | %.1f %s | %.2f%s |\n", what.c_str(), value,
              unit.c_str(), baselineWhat.c_str(), baseline, unit.c_str(), ratio,
              lowerIsBetter ? "x" : "x of baseline");
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--no-sleepy") == 0)
      sleepy = false;
    else if (std::strcmp(argv[i], "--percentiles") == 0)
      percentiles = true;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0)
      reps = std::max(1, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--only") == 0)
      only = argv[i + 1];
  constexpr int pingIterations = 5000;

  std::printf("| figure | runtime | baseline | baseline value | ratio |\n");
  std::printf("|---|---|---|---|---|\n");

  // In-process: controller and proc in this process, inproc:// transport.
  if (wanted("inproc")) {
    RuntimeOptions o;
    o.listenAddr = "inproc://0";
    Runtime ctl(o);
    if (Status s = ctl.start(); !s.isOk())
      die("start", s);
    auto options = benchOptions();
    options.launcher = std::make_shared<InProcessLauncher>();
    auto procs = check(Host(ctl).spawnProcs({{"gpu", 1}}, options), "spawn");
    auto echo = check(procs.spawn("e", "BenchEcho"), "spawn actor");
    auto sizes = echoWireSizes(ctl.addr(), "inproc://1048577");
    double ours = repeat([&] { return actorPingPongUs(echo, pingIterations); });
    double raw = repeat([&] {
      return bench::rawPingPongUs(bench::RawKind::SocketPairThreads,
                                  sizes.first, sizes.second, pingIterations);
    });
    row("actor ping-pong, in-process (inproc://)", "µs", ours,
        "socketpair ping-pong between 2 threads", raw, true);
    (void)procs.stop();
  }

  // Unix sockets: the global controller runtime and one worker process.
  auto unixProcs = check(
      thisHost().spawnProcs({{"gpu", 1}}, benchOptions("unix")), "spawn unix");
  auto unixEcho = check(unixProcs.spawn("e", "BenchEcho"), "spawn actor");
  if (wanted("unix")) {
    auto sizes = echoWireSizes(Runtime::global().addr(),
                               "unix:/tmp/monarch-XXXXXX/m0-0.sock");
    double ours =
        repeat([&] { return actorPingPongUs(unixEcho, pingIterations); });
    double raw = repeat([&] {
      return bench::rawPingPongUs(bench::RawKind::Unix, sizes.first,
                                  sizes.second, pingIterations);
    });
    row("actor ping-pong, Unix socket (2 processes)", "µs", ours,
        "raw Unix socket ping-pong, same bytes", raw, true);
    // The runtime's threads poll before they sleep (util/Polling.h); the
    // same raw loop with polling reads is the floor for that.
    double rawPolling = repeat([&] {
      return bench::rawPingPongUs(bench::RawKind::Unix, sizes.first,
                                  sizes.second, pingIterations, true);
    });
    row("actor ping-pong, Unix socket (2 processes)", "µs", ours,
        "raw Unix ping-pong, both sides polling", rawPolling, true);
    if (sleepy) {
      // With polling off everywhere, every hop pays its wake-up.
      auto options = benchOptions("unix");
      options.workerEnv = {{"MONARCH_POLL_US", "0"}};
      auto sleepyProcs =
          check(thisHost().spawnProcs({{"gpu", 1}}, options), "spawn unix");
      auto sleepyEcho = check(sleepyProcs.spawn("e", "BenchEcho"), "spawn");
      std::vector<std::pair<PollSite, std::chrono::microseconds>> saved;
      for (auto site :
           {PollSite::Future, PollSite::IoThread, PollSite::Actor}) {
        saved.emplace_back(site, pollTime(site));
        setPollTime(site, 0us);
      }
      double sleeping =
          repeat([&] { return actorPingPongUs(sleepyEcho, pingIterations); });
      for (auto [site, t] : saved)
        setPollTime(site, t);
      (void)sleepyProcs.stop();
      row("actor ping-pong, Unix socket, no polling (MONARCH_POLL_US=0)", "µs",
          sleeping, "raw Unix socket ping-pong, same bytes", raw, true);
    }
  }

  // TCP loopback: a controller runtime listening on TCP, workers on TCP.
  if (wanted("tcp")) {
    RuntimeOptions o;
    o.listenAddr = "tcp://127.0.0.1:0";
    Runtime ctl(o);
    if (Status s = ctl.start(); !s.isOk())
      die("start", s);
    auto procs = check(Host(ctl).spawnProcs({{"gpu", 1}}, benchOptions("tcp")),
                       "spawn tcp");
    auto echo = check(procs.spawn("e", "BenchEcho"), "spawn actor");
    auto sizes = echoWireSizes(ctl.addr(), "tcp://127.0.0.1:40000");
    double ours = repeat([&] { return actorPingPongUs(echo, pingIterations); });
    double raw = repeat([&] {
      return bench::rawPingPongUs(bench::RawKind::Tcp, sizes.first,
                                  sizes.second, pingIterations);
    });
    row("actor ping-pong, TCP loopback (2 processes)", "µs", ours,
        "raw TCP loopback ping-pong, same bytes", raw, true);
    double rawPolling = repeat([&] {
      return bench::rawPingPongUs(bench::RawKind::Tcp, sizes.first,
                                  sizes.second, pingIterations, true);
    });
    row("actor ping-pong, TCP loopback (2 processes)", "µs", ours,
        "raw TCP loopback ping-pong, both sides polling", rawPolling, true);
    (void)procs.stop();
  }

  // Throughput of small fire-and-forget messages to another process.
  if (wanted("throughput")) {
    constexpr int count = 200000;
    int64_t sent = 0;
    double ours = repeat([&] {
      auto start = Clock::now();
      for (int i = 0; i < count; ++i)
        if (!unixEcho.broadcast("absorb", int64_t{i}).isOk())
          die("broadcast", Status(ErrorCode::Internal, "failed"));
      sent += count;
      auto got = check(unixEcho.callOne<int64_t>("received").get(120s), "sync");
      if (got != sent)
        die("throughput", Status(ErrorCode::Internal, "lost messages"));
      std::chrono::duration<double> took = Clock::now() - start;
      return count / took.count();
    });
    transport::Message m;
    m.envelope.set_sender("controller@unix:/tmp/monarch-XXXXXX/proc.sock");
    m.envelope.set_seq(100000);
    auto *c = m.envelope.mutable_cast();
    c->set_mesh("e");
    c->set_endpoint("absorb");
    c->mutable_args()->mutable_list()->add_items()->set_int_value(100000);
    c->set_fanout(16);
    c->mutable_here()->set_addr("unix:/tmp/monarch-XXXXXX/m0-0.sock");
    c->mutable_here()->add_locals(0);
    c->mutable_here()->set_seq(100000);
    size_t bytes = transport::encodeMessage(m)->totalBytes();
    double raw = repeat([&] {
      return bench::rawThroughput(bench::RawKind::Unix, bytes, count);
    });
    row("small-message throughput to another process (broadcast, " +
            std::to_string(bytes) + " B)",
        "msg/s", ours, "raw Unix socket, one write per message", raw, false);
  }
  (void)unixProcs.stop();

  // Cast to N actors on 4 procs and collect every reply.
  if (wanted("cast")) {
    auto procs =
        check(thisHost().spawnProcs({{"procs", 4}}, benchOptions()), "spawn 4");
    auto single = check(procs.spawn("one", "BenchEcho"), "spawn one");
    auto oneActor = check(single.slice("procs", 0), "slice");
    double rtt = repeat([&] { return actorPingPongUs(oneActor, 2000); });
    for (int n : {16, 64, 256, 1024}) {
      auto mesh = check(procs.spawnPerProc("cast" + std::to_string(n),
                                           "BenchEcho", {{"local", n / 4}}),
                        "spawn cast mesh");
      for (int i = 0; i < 5; ++i)
        check(mesh.call<int64_t>("rank").get(30s), "warm up");
      double us = repeat([&] {
        std::vector<double> samples;
        for (int i = 0; i < 20; ++i) {
          auto start = Clock::now();
          auto r = check(mesh.call<int64_t>("rank").get(30s), "cast");
          if (r.size() != static_cast<size_t>(n))
            die("cast", Status(ErrorCode::Internal, "missing replies"));
          std::chrono::duration<double, std::micro> took = Clock::now() - start;
          samples.push_back(took.count());
        }
        return median(samples);
      });
      row("cast to " + std::to_string(n) + " actors on 4 procs, all replies",
          "µs", us, "one actor round trip (callOne)", rtt, true);
    }
    (void)procs.stop();
  }
  return 0;
}
