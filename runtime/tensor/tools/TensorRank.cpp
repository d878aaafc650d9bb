//===- TensorRank.cpp - Run one rank of a plan ----------------------------===//
//
// monarch-tensor-rank --plan FILE --rank R --store DIR --out FILE
//                     [--memory-cap BYTES] [--timeout-ms MS]
//
// Loads a plan, runs this rank's instructions with Gloo rendezvousing through
// a FileStore in DIR, waits for the streams to finish and writes a RunReport
// (fetches, failures, statuses) to FILE. A stand-in for the tensor worker
// actor, used by the multi-process tests and benchmarks.
//
// Exit status: 0 ran (instruction failures are in the report), 2 bad usage
// or plan (message on stderr), 3 timed out.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Executor.h"
#include "monarch/tensor/Plan.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

using namespace monarch::tensor;
namespace plan = monarch::plan;

int main(int argc, char **argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2)
    args[argv[i]] = argv[i + 1];
  for (const char *required : {"--plan", "--rank", "--store", "--out"})
    if (!args.count(required)) {
      std::fprintf(stderr,
                   "usage: %s --plan FILE --rank R --store DIR --out FILE "
                   "[--memory-cap BYTES] [--timeout-ms MS]\n",
                   argv[0]);
      return 2;
    }
  auto program = loadPlanFile(args["--plan"]);
  if (!program.ok()) {
    std::fprintf(stderr, "monarch-tensor-rank: %s\n",
                 program.status().message().c_str());
    return 2;
  }
  std::chrono::milliseconds timeout(
      args.count("--timeout-ms") ? std::stoll(args["--timeout-ms"]) : 60000);

  ExecutorOptions options;
  options.rank = std::stoll(args["--rank"]);
  for (const auto &d : program->root())
    options.rootShape.emplace_back(d.name(), d.size());
  GlooOptions gloo;
  gloo.timeout = timeout;
  options.collectives =
      makeGlooBackend(std::make_shared<FileStore>(args["--store"]), gloo);
  options.timeout = timeout;
  if (args.count("--memory-cap"))
    options.memoryCapBytes = std::stoull(args["--memory-cap"]);

  std::mutex mutex;
  plan::RunReport report;
  report.set_rank(options.rank);
  ExecutorCallbacks callbacks;
  callbacks.onFailure = [&](const plan::Failure &f) {
    std::lock_guard<std::mutex> lock(mutex);
    *report.add_failures() = f;
  };
  callbacks.onFetch = [&](const plan::FetchReply &r) {
    std::lock_guard<std::mutex> lock(mutex);
    *report.add_fetches() = r;
  };
  callbacks.onStatus = [&](int64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    report.add_statuses(id);
  };

  int rc = 0;
  {
    Executor executor(options, callbacks);
    if (Status s = executor.run(program.value()); !s.isOk()) {
      std::fprintf(stderr, "monarch-tensor-rank: %s\n", s.message().c_str());
      return 2;
    }
    if (!executor.waitIdle(timeout * 2)) {
      std::fprintf(stderr, "monarch-tensor-rank: rank %lld timed out\n",
                   static_cast<long long>(options.rank));
      std::fflush(stderr);
      std::_Exit(3); // streams may be blocked; do not join them
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  std::ofstream out(args["--out"], std::ios::binary | std::ios::trunc);
  if (!report.SerializeToOstream(&out)) {
    std::fprintf(stderr, "monarch-tensor-rank: cannot write %s\n",
                 args["--out"].c_str());
    return 2;
  }
  return rc;
}
