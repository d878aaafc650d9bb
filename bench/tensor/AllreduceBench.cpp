//===- AllreduceBench.cpp - Gloo all-reduce bandwidth vs torch.distributed ===//
//
//   build-tensor/bin/tensor-allreduce-bench [--ranks 4] [--iters 10]
//       [--backend gloo|nccl]   (nccl: one rank per GPU, rank % GPUs; bus
//                                bandwidth = bytes / time * 2(n-1)/n)
//
// Starts N processes of itself that all-reduce float32 buffers from 4 KiB to
// 64 MiB through monarch's Gloo backend (FileStore rendezvous), then runs the
// same sizes with torch.distributed's Gloo all_reduce (/usr/bin/python3,
// bench/tensor/torch_allreduce.py) and prints both with their ratio
// (bandwidth of monarch / bandwidth of torch.distributed; goal >= 0.9).
// The time of a size is the median over iterations of the slowest rank.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Collectives.h"
#include "monarch/tensor/TempDir.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#ifdef MONARCH_BENCH_NCCL
#include <cuda_runtime.h>
#endif

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace monarch::tensor;
namespace plan = monarch::plan;

namespace {

const std::vector<size_t> kSizes{4 << 10, 64 << 10, 1 << 20, 16 << 20,
                                 64 << 20};

/// Host memory for Gloo; with NCCL, memory on this rank's GPU (rank % GPUs).
class BenchBuffer {
public:
  BenchBuffer(size_t count, bool device) : count(count), device(device) {
    if (!device) {
      host.assign(count, 1.f);
      data = host.data();
      return;
    }
#ifdef MONARCH_BENCH_NCCL
    if (cudaMalloc(&data, count * sizeof(float)) != cudaSuccess)
      data = nullptr;
    else
      cudaMemset(data, 0, count * sizeof(float));
#endif
  }
  ~BenchBuffer() {
#ifdef MONARCH_BENCH_NCCL
    if (device && data)
      cudaFree(data);
#endif
  }
  BenchBuffer(const BenchBuffer &) = delete;
  BenchBuffer &operator=(const BenchBuffer &) = delete;
  Buffer buffer(plan::DType dtype = plan::FLOAT32) const {
    return Buffer{data, count, dtype};
  }
  bool ok() const { return data != nullptr; }

private:
  size_t count;
  bool device;
  std::vector<float> host;
  void *data = nullptr;
};

int runRank(int rank, int ranks, int iters, const std::string &store,
            const std::string &out, bool nccl) {
  auto files = std::make_shared<FileStore>(store);
  std::shared_ptr<CollectiveBackend> backend;
  if (nccl) {
#ifdef MONARCH_BENCH_NCCL
    int gpus = 0;
    cudaGetDeviceCount(&gpus);
    if (gpus <= 0 || cudaSetDevice(rank % gpus) != cudaSuccess) {
      std::fprintf(stderr, "rank %d: no GPU\n", rank);
      return 1;
    }
#endif
    backend = makeNcclBackend(files, std::chrono::seconds(120));
  } else {
    GlooOptions options;
    options.timeout = std::chrono::seconds(120);
    backend = makeGlooBackend(files, options);
  }
  if (!backend) {
    std::fprintf(stderr, "rank %d: built without NCCL\n", rank);
    return 1;
  }
  std::vector<int64_t> members(ranks);
  std::iota(members.begin(), members.end(), 0);
  auto comm = backend->connect("bench", members, rank);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank,
                 comm.status().message().c_str());
    return 1;
  }
  Communicator &c = *comm.value();
  std::ofstream report(out);
  BenchBuffer token(1, nccl);
  Buffer barrier = token.buffer(plan::INT32);
  for (size_t bytes : kSizes) {
    BenchBuffer data(bytes / 4, nccl);
    if (!data.ok() || !token.ok())
      return 1;
    Buffer buf = data.buffer();
    if (!c.allreduce(buf, ReduceKind::Sum).isOk()) // warm-up
      return 1;
    std::vector<double> times;
    for (int i = 0; i < iters; ++i) {
      if (!c.allreduce(barrier, ReduceKind::Sum).isOk())
        return 1;
      auto start = std::chrono::steady_clock::now();
      if (!c.allreduce(buf, ReduceKind::Sum).isOk())
        return 1;
      times.push_back(std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    }
    std::sort(times.begin(), times.end());
    report << bytes << " " << times[times.size() / 2] << "\n";
  }
  return 0;
}

std::map<size_t, double> readTimes(const std::string &path,
                                   std::map<size_t, double> into = {}) {
  std::ifstream in(path);
  size_t bytes;
  double seconds;
  while (in >> bytes >> seconds)
    into[bytes] = std::max(into[bytes], seconds);
  return into;
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

} // namespace

int main(int argc, char **argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2)
    args[argv[i]] = argv[i + 1];
  int ranks = args.count("--ranks") ? std::stoi(args["--ranks"]) : 4;
  int iters = args.count("--iters") ? std::stoi(args["--iters"]) : 10;
  std::string kind = args.count("--backend") ? args["--backend"] : "gloo";
  if (kind != "gloo" && kind != "nccl") {
    std::fprintf(stderr, "--backend is gloo or nccl, not %s\n", kind.c_str());
    return 2;
  }
  bool nccl = kind == "nccl";
  if (args.count("--rank"))
    return runRank(std::stoi(args["--rank"]), ranks, iters, args["--store"],
                   args["--out"], nccl);

  TempDir tmp("allreduce");
  std::string dir = tmp.path();
  ::mkdir((dir + "/store").c_str(), 0700);
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      std::string rank = std::to_string(r), n = std::to_string(ranks),
                  it = std::to_string(iters), store = dir + "/store",
                  out = dir + "/" + rank + ".txt";
      ::execl("/proc/self/exe", argv[0], "--rank", rank.c_str(), "--ranks",
              n.c_str(), "--iters", it.c_str(), "--store", store.c_str(),
              "--out", out.c_str(), "--backend", kind.c_str(),
              static_cast<char *>(nullptr));
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "a monarch rank failed\n");
      return 1;
    }
  }
  std::map<size_t, double> monarch;
  for (int r = 0; r < ranks; ++r)
    monarch = readTimes(dir + "/" + std::to_string(r) + ".txt", monarch);

  std::string torchOut = dir + "/torch.txt";
  // Debian's python3-torch here; $MONARCH_PYTHON where torch lives elsewhere
  // (the GPU machine's python3).
  const char *python = std::getenv("MONARCH_PYTHON");
  std::string cmd = std::string(python ? python : "/usr/bin/python3") +
                    " " MONARCH_TORCH_ALLREDUCE_SCRIPT " " +
                    std::to_string(ranks) + " " + std::to_string(freePort()) +
                    " " + torchOut + " " + std::to_string(iters) + " " + kind;
  for (size_t s : kSizes)
    cmd += " " + std::to_string(s);
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "torch.distributed baseline failed: %s\n",
                 cmd.c_str());
    return 1;
  }
  std::map<size_t, double> torch = readTimes(torchOut);

  const char *name = nccl ? "NCCL" : "Gloo";
  std::printf("| size | monarch %s | torch.distributed %s | ratio (bandwidth, "
              "monarch / torch) |\n|---|---|---|---|\n",
              name, name);
  for (size_t s : kSizes) {
    // NCCL: bus bandwidth (nccl-tests' busbw, what each link carries in a
    // ring); Gloo: bytes reduced per second, as in earlier tables.
    double factor = nccl ? 2.0 * (ranks - 1) / ranks : 1.0;
    auto gbps = [&](double t) { return s / t / 1e9 * factor; };
    std::printf("| %zu KiB | %.3f ms (%.2f GB/s) | %.3f ms (%.2f GB/s) | "
                "%.2fx |\n",
                s >> 10, monarch[s] * 1e3, gbps(monarch[s]), torch[s] * 1e3,
                gbps(torch[s]), torch[s] / monarch[s]);
  }
  return 0;
}
