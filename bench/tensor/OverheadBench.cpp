//===- OverheadBench.cpp - Per-instruction overhead of the engine ---------===//
//
// A plan of 10,000 small ATen ops (100x100 float) run by the executor vs the
// same ops in a local libtorch loop, in one run. Reports the ratio of the
// medians (goal: <= 1.3x). Compiled loops run through recordings, so two more
// cases: the same 10,000 ops as one recording body called once, and a 10-op
// recording called 1,000 times (against the same 10-op pattern locally).
//
//   build-tensor/bin/tensor-overhead-bench --benchmark_repetitions=7
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Executor.h"
#include "monarch/tensor/Plan.h"
#include "monarch/tensor/PlanBuilder.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>

using namespace monarch::tensor;
namespace plan = monarch::plan;

namespace {

constexpr int kOps = 10000;
constexpr int kDeleteEvery = 1;

/// Op k of the chain is kind (k % period) % 4: add, mul, sub, div.
at::Tensor localLoop(const at::Tensor &x, at::Tensor y, int period) {
  for (int i = 0; i < kOps; ++i) {
    switch (i % period % 4) {
    case 0:
      y = at::add(y, x);
      break;
    case 1:
      y = at::mul(y, x);
      break;
    case 2:
      y = at::sub(y, x, 0.5);
      break;
    default:
      y = at::div(y, 1.5);
      break;
    }
  }
  return y;
}

/// Appends op `i` of the chain (kind i % 4) to `b`; returns its result.
int64_t chainOp(PlanBuilder &b, int i, int64_t x, int64_t y) {
  switch (i % 4) {
  case 0:
    return b.op(0, "aten::add", "Tensor", {val::ref(y), val::ref(x)});
  case 1:
    return b.op(0, "aten::mul", "Tensor", {val::ref(y), val::ref(x)});
  case 2:
    return b.op(0, "aten::sub", "Tensor", {val::ref(y), val::ref(x)}, 1, 0,
                {{"alpha", val::scalar(0.5)}});
  default:
    return b.op(0, "aten::div", "Scalar", {val::ref(y), val::scalar(1.5)});
  }
}

plan::Program loadOrDie(const PlanBuilder &b) {
  auto loaded = loadPlan(b.serialize());
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().message().c_str());
    std::abort();
  }
  return loaded.value();
}

/// The same chain as a plan: refs of intermediates deleted in batches.
plan::Program chainPlan() {
  PlanBuilder b({{"x", 1}});
  int64_t x = b.op(0, "aten::rand", "", {val::ints({100, 100})});
  int64_t y = b.op(0, "aten::rand", "", {val::ints({100, 100})});
  std::vector<int64_t> dead;
  for (int i = 0; i < kOps; ++i) {
    int64_t next = chainOp(b, i, x, y);
    dead.push_back(y);
    y = next;
    if (dead.size() == kDeleteEvery) {
      b.deleteRefs(0, dead);
      dead.clear();
    }
  }
  dead.push_back(x);
  dead.push_back(y);
  b.deleteRefs(0, dead);
  return loadOrDie(b);
}

/// A recording (x, y) -> the chain of `n` ops from y; each intermediate is
/// deleted after its use, as in chainPlan().
void defineChainRecording(PlanBuilder &b, int64_t id, int n) {
  PlanBuilder body({{"x", 1}});
  int64_t x = body.ref(), y0 = body.ref(), y = y0;
  for (int i = 0; i < n; ++i) {
    int64_t next = chainOp(body, i, x, y);
    if (y != y0) // the formal belongs to the caller
      body.deleteRefs(0, {y});
    y = next;
  }
  auto *rec = b.add(0).mutable_define_recording()->mutable_recording();
  rec->set_id(id);
  rec->add_formals(x);
  rec->add_formals(y0);
  rec->add_results(y);
  for (const auto &inst : body.program().instructions())
    *rec->add_body() = inst;
}

int64_t callRecording(PlanBuilder &b, int64_t id, int64_t x, int64_t y) {
  auto *call = b.add(0).mutable_call_recording();
  call->set_recording(id);
  call->add_actuals(x);
  call->add_actuals(y);
  int64_t result = b.ref();
  call->add_results(result);
  return result;
}

/// Setup (recording of `bodyOps` ops, x and y) and the timed program: the
/// recording called kOps / bodyOps times in a chain, results deleted.
std::pair<plan::Program, plan::Program> recordingPlans(int bodyOps) {
  PlanBuilder b({{"x", 1}});
  defineChainRecording(b, 1, bodyOps);
  int64_t x = b.op(0, "aten::rand", "", {val::ints({100, 100})});
  int64_t y = b.op(0, "aten::rand", "", {val::ints({100, 100})});
  plan::Program setup = loadOrDie(b);
  // Same builder: ref ids stay distinct from the setup's. Not validated:
  // it uses refs the setup program defined.
  b.program().clear_instructions();
  int64_t prev = y;
  for (int k = 0; k < kOps / bodyOps; ++k) {
    int64_t next = callRecording(b, 1, x, prev);
    if (prev != y)
      b.deleteRefs(0, {prev});
    prev = next;
  }
  b.deleteRefs(0, {prev});
  return {setup, b.program()};
}

void BM_LocalLibtorch(benchmark::State &state) {
  at::set_num_threads(1);
  at::Tensor x = at::rand({100, 100}), y = at::rand({100, 100});
  for (auto _ : state)
    benchmark::DoNotOptimize(localLoop(x, y, kOps));
  state.SetItemsProcessed(state.iterations() * kOps);
}

/// The op pattern of the 10-op recording loop.
void BM_LocalLibtorchLoop10(benchmark::State &state) {
  at::set_num_threads(1);
  at::Tensor x = at::rand({100, 100}), y = at::rand({100, 100});
  for (auto _ : state)
    benchmark::DoNotOptimize(localLoop(x, y, 10));
  state.SetItemsProcessed(state.iterations() * kOps);
}

/// The same chain through the boxed dispatcher (what the engine calls), to
/// separate the cost of boxing from the engine's own.
void BM_LocalBoxed(benchmark::State &state) {
  at::set_num_threads(1);
  auto &d = c10::Dispatcher::singleton();
  c10::OperatorHandle ops[4] = {*d.findSchema({"aten::add", "Tensor"}),
                                *d.findSchema({"aten::mul", "Tensor"}),
                                *d.findSchema({"aten::sub", "Tensor"}),
                                *d.findSchema({"aten::div", "Scalar"})};
  at::Tensor x = at::rand({100, 100}), y0 = at::rand({100, 100});
  for (auto _ : state) {
    at::Tensor y = y0;
    torch::jit::Stack stack;
    for (int i = 0; i < kOps; ++i) {
      stack.clear();
      stack.push_back(y);
      switch (i % 4) {
      case 0:
        stack.push_back(x);
        stack.push_back(c10::Scalar(1));
        break;
      case 1:
        stack.push_back(x);
        break;
      case 2:
        stack.push_back(x);
        stack.push_back(c10::Scalar(0.5));
        break;
      default:
        stack.push_back(c10::Scalar(1.5));
        break;
      }
      ops[i % 4].callBoxed(&stack);
      y = stack.back().toTensor();
    }
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(state.iterations() * kOps);
}

/// Times `run` of `program` on one executor per iteration (submit time as a
/// counter), after running `setup` once outside the timed loop.
void timeEngine(benchmark::State &state, const plan::Program *setup,
                const plan::Program &program) {
  at::set_num_threads(1);
  ExecutorOptions options;
  options.rootShape = {{"x", 1}};
  int failures = 0;
  ExecutorCallbacks callbacks;
  callbacks.onFailure = [&](const plan::Failure &) { ++failures; };
  Executor executor(options, callbacks);
  if (setup && (!executor.run(*setup).isOk() ||
                !executor.waitIdle(std::chrono::seconds(60)))) {
    state.SkipWithError("setup failed");
    return;
  }
  double submitSeconds = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    Status submitted = executor.run(program);
    submitSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (!submitted.isOk() || !executor.waitIdle(std::chrono::seconds(60))) {
      state.SkipWithError("engine run failed");
      break;
    }
  }
  if (failures)
    state.SkipWithError("instructions failed");
  state.counters["submit_ms"] = submitSeconds * 1e3 / state.iterations();
  state.SetItemsProcessed(state.iterations() * kOps);
}

void BM_EnginePlan(benchmark::State &state) {
  timeEngine(state, nullptr, chainPlan());
}

/// kOps ops as recording calls of `bodyOps` ops each (state.range(0)); the
/// recording is defined (and compiled) once, outside the timed loop.
void BM_EngineRecording(benchmark::State &state) {
  auto [setup, calls] = recordingPlans(static_cast<int>(state.range(0)));
  timeEngine(state, &setup, calls);
}

BENCHMARK(BM_LocalLibtorch)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_LocalLibtorchLoop10)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_LocalBoxed)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_EnginePlan)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
// Arg: ops per recording body (10,000: called once; 10: called 1,000 times).
BENCHMARK(BM_EngineRecording)
    ->Arg(kOps)
    ->Arg(10)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

/// Prints the console table and keeps each benchmark's median.
class MedianReporter : public benchmark::ConsoleReporter {
public:
  void ReportRuns(const std::vector<Run> &runs) override {
    for (const auto &run : runs)
      if (run.aggregate_name == "median" ||
          (run.run_type == Run::RT_Iteration &&
           !medians.count(
               run.run_name.function_name +
               (run.run_name.args.empty() ? "" : "/" + run.run_name.args)))) {
        std::string name = run.run_name.function_name;
        if (!run.run_name.args.empty())
          name += "/" + run.run_name.args;
        medians[name] = run.GetAdjustedRealTime();
        cpuMedians[name] = run.GetAdjustedCPUTime();
      }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> medians, cpuMedians;
};

} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  MedianReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  double local = reporter.medians["BM_LocalLibtorch"];
  double engine = reporter.medians["BM_EnginePlan"];
  double boxed = reporter.medians["BM_LocalBoxed"];
  if (local > 0 && engine > 0)
    std::printf(
        "\n%d ops of 100x100: local libtorch %.2f ms, engine plan "
        "%.2f ms, ratio %.2fx (goal <= 1.3x); per-op overhead %.2f us\n",
        kOps, local, engine, engine / local, (engine - local) * 1000.0 / kOps);
  double localCpu = reporter.cpuMedians["BM_LocalLibtorch"];
  double engineCpu = reporter.cpuMedians["BM_EnginePlan"];
  if (localCpu > 0 && engineCpu > 0)
    std::printf("process CPU time: local %.2f ms, engine %.2f ms (all its "
                "threads), ratio %.2fx\n",
                localCpu, engineCpu, engineCpu / localCpu);
  if (local > 0 && boxed > 0)
    std::printf("boxed dispatcher loop (no engine) %.2f ms, ratio %.2fx\n",
                boxed, boxed / local);
  auto compare = [&](const char *what, const std::string &engineName,
                     const std::string &localName) {
    double e = reporter.medians[engineName], l = reporter.medians[localName];
    double ec = reporter.cpuMedians[engineName],
           lc = reporter.cpuMedians[localName];
    if (e > 0 && l > 0)
      std::printf("%s: %.2f ms vs local %.2f ms, ratio %.2fx wall, %.2fx "
                  "CPU\n",
                  what, e, l, e / l, lc > 0 ? ec / lc : 0.0);
  };
  compare("plan (10,000 instructions + deletes)", "BM_EnginePlan",
          "BM_LocalLibtorch");
  compare("one recording of 10,000 ops, called once",
          "BM_EngineRecording/10000", "BM_LocalLibtorch");
  compare("10-op recording called 1,000 times", "BM_EngineRecording/10",
          "BM_LocalLibtorchLoop10");
  return 0;
}
