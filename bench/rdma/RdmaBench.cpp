//===- RdmaBench.cpp - TCP-fallback bandwidth vs raw TCP and memcpy -------===//
//
//   monarch-rdma-bench [--reps N] [--sizes 1M,16M,256M]
//
// For each size, in one run: the bandwidth of rdma::readInto and writeFrom
// between this process and one worker process over the TCP fallback (the
// workers listen on TCP loopback), a raw TCP loopback stream of the same
// bytes into a touched buffer, and memcpy between two touched buffers. Each
// figure is the median of N repetitions; the table gives the ratios.
//
//===----------------------------------------------------------------------===//
#include "RawStream.h"

#include "monarch/rdma/RdmaBuffer.h"
#include "monarch/runtime/Monarch.h"
#include "monarch/runtime/proc/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double gbps(size_t bytes, double seconds) { return bytes / seconds / 1e9; }

size_t parseSize(const std::string &s) {
  size_t n = std::stoull(s);
  switch (s.back()) {
  case 'K':
    return n << 10;
  case 'M':
    return n << 20;
  case 'G':
    return n << 30;
  default:
    return n;
  }
}

std::vector<double> timeRdma(bool read, const monarch::rdma::RdmaHandle &h,
                             std::vector<uint8_t> &local, int reps) {
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    auto f = read ? monarch::rdma::readInto(h, local.data(), local.size())
                  : monarch::rdma::writeFrom(h, local.data(), local.size());
    auto done = f.get(120s);
    if (!done.ok()) {
      std::fprintf(stderr, "transfer failed: %s\n",
                   done.status().toString().c_str());
      std::exit(1);
    }
    out.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return out;
}

std::vector<double> timeMemcpy(size_t bytes, int reps) {
  std::vector<uint8_t> a(bytes, 1), b(bytes, 2);
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    out.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  int reps = 7;
  std::vector<size_t> sizes = {1u << 20, 16u << 20, 256u << 20};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--reps") {
      reps = std::stoi(argv[i + 1]);
    } else if (flag == "--sizes") {
      sizes.clear();
      std::string list = argv[i + 1];
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        sizes.push_back(parseSize(list.substr(pos, comma - pos)));
        if (comma == std::string::npos)
          break;
        pos = comma + 1;
      }
    }
  }

  // Both directions over TCP loopback: the workers' listeners and this
  // process's own (replies to reads arrive there).
  monarch::RuntimeOptions runtimeOptions;
  runtimeOptions.listenAddr = "tcp://127.0.0.1:0";
  monarch::Runtime::setGlobalOptions(runtimeOptions);
  monarch::SpawnProcsOptions options;
  options.name = "rdma-bench";
  options.transport = "tcp";
  options.actorLibraries = {MONARCH_RDMA_BENCH_ACTORS_LIB};
  auto procs = monarch::thisHost().spawnProcs({{"owner", 1}}, options);
  if (!procs.ok()) {
    std::fprintf(stderr, "spawn: %s\n", procs.status().toString().c_str());
    return 1;
  }
  auto owner = procs->spawn("owner", "RdmaBenchOwner");
  if (!owner.ok()) {
    std::fprintf(stderr, "spawn: %s\n", owner.status().toString().c_str());
    return 1;
  }
  std::printf(
      "backend: %s, %d repetitions (median), chunk %zu bytes, %u "
      "connection(s)\n\n",
      monarch::rdma::backendName(monarch::rdma::RdmaEngine::processBackend()),
      reps, monarch::rdma::RdmaOptions::fromEnvironment().chunkBytes,
      monarch::rdma::RdmaOptions::fromEnvironment().lanes);
  std::printf("| size | rdma read GB/s | rdma write GB/s | raw TCP stream "
              "GB/s | read / raw | write / raw | memcpy GB/s | read / memcpy "
              "|\n|---|---|---|---|---|---|---|---|\n");
  // Errors go to stderr; keep the table in order with them.
  std::fflush(stdout);
  for (size_t size : sizes) {
    auto h = owner
                 ->callOne<monarch::rdma::RdmaHandle>(
                     "alloc", static_cast<int64_t>(size))
                 .get(120s);
    if (!h.ok()) {
      std::fprintf(stderr, "alloc: %s\n", h.status().toString().c_str());
      return 1;
    }
    std::vector<uint8_t> local(size, 0x11);
    // One untimed warm-up of each (connections, first-touch of kernel
    // buffers).
    timeRdma(true, *h, local, 1);
    double read = gbps(size, median(timeRdma(true, *h, local, reps)));
    double write = gbps(size, median(timeRdma(false, *h, local, reps)));
    monarch::bench::rawTcpStreamSeconds(size, 1);
    double raw =
        gbps(size, median(monarch::bench::rawTcpStreamSeconds(size, reps)));
    double copy = gbps(size, median(timeMemcpy(size, reps)));
    std::printf("| %zu MiB | %.2f | %.2f | %.2f | %.2f× | %.2f× | %.2f | "
                "%.2f× |\n",
                size >> 20, read, write, raw, read / raw, write / raw, copy,
                read / copy);
    std::fflush(stdout);
  }
  return procs->stop().isOk() ? 0 : 1;
}
