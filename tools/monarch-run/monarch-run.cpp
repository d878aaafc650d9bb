//===- monarch-run - Run a compiled program on local worker processes -----===//
//
//   monarch-run PROGRAM.plan|PROGRAM.mlir [--procs host=2,gpu=2]
//               [--trace trace.json] [--memory-cap BYTES] [--timeout SECONDS]
//               [--entry FUNC] [--no-optimize] [--pipeline-options OPTS]
//               [--emit-plan OUT.plan] [--monarch-opt PATH]
//               [--compile-timeout SECONDS] [--cuda-graphs on|off]
//               [--hosts ADDR,ADDR | --hosts-file FILE] [--secret-file FILE]
//               [--slurm [--controller-host HOST] [--agents-per-node K]]
//
// Spawns one tensor worker per rank of the plan's root mesh, ships each the
// whole plan, prints fetched values in program order as they arrive and
// failures with rank and instruction, and exits non-zero if any fetched value
// failed or a worker died. A .mlir file is compiled first, in-process when
// the compiler is built in, else by running monarch-opt (--monarch-opt PATH,
// $MONARCH_OPT, monarch-opt-static or monarch-opt beside this executable, or
// on PATH; PlanCompiler.h): the same pipeline and the same plan either way.
// --monarch-opt forces the external compile in any build; --compile-timeout
// bounds it (default 600 s). A file that does not verify launches nothing.
//
// --emit-plan writes the compiled (or loaded) plan to OUT.plan and exits
// without launching anything: the same compile as a run, for shipping a plan
// to machines without the compiler.
//
// --cuda-graphs on has workers with a GPU run the plan's CUDA-graph
// candidates as captured graphs; off runs every recording op by op
// (docs/plan.md, "CUDA graphs"). Without it the workers' default holds: on,
// unless MONARCH_CUDA_GRAPHS=off is in their environment. The compile marks
// the candidates either way.
//
// Multi-host (docs/multi-host.md): with --hosts or --hosts-file the
// controller attaches to running host agents (monarch-host) that hold the
// job secret in --secret-file; with --slurm, inside an allocation, it starts
// one agent per node with srun itself, handing them a fresh secret on stdin.
// The plan's first dim is the host dim; its size must be the number of hosts.
//
// Exit status: 0 every fetch succeeded; 1 a fetch failed or a worker died;
// 2 bad usage, bad program or compile error; 3 the run timed out.
//
//===----------------------------------------------------------------------===//

#include "PlanCompiler.h"
#include "RunOutput.h"

#include "monarch/runtime/host/AttachHosts.h"
#include "monarch/runtime/host/HostAddresses.h"

#include "monarch/tensor/Controller.h"
#include "monarch/tensor/Plan.h"

#include <chrono>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <unistd.h>

using namespace monarch;
using namespace monarch::tensor;

namespace {

struct Args {
  std::string program;
  std::string procs;
  std::string trace;
  size_t memoryCap = 0;
  int64_t timeoutSeconds = 120;
  std::string entry;
  bool optimize = true;
  std::string pipelineOptions;
  std::string emitPlan;
  std::string monarchOpt;
  int64_t compileTimeoutSeconds = 600;
  std::optional<bool> cudaGraphs; ///< unset: the workers' default
  std::string hosts;
  std::string hostsFile;
  std::string secretFile;
  bool slurm = false;
  std::string controllerHost;
  int64_t agentsPerNode = 1;
};

int usage(const std::string &why) {
  if (!why.empty())
    std::fprintf(stderr, "monarch-run: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: monarch-run PROGRAM.plan|PROGRAM.mlir [--procs "
               "host=2,gpu=2] [--trace FILE]\n"
               "         [--memory-cap BYTES] [--timeout SECONDS] [--entry "
               "FUNC] [--no-optimize]\n"
               "         [--pipeline-options OPTS] [--emit-plan OUT.plan]\n"
               "         [--monarch-opt PATH] [--compile-timeout SECONDS] "
               "[--cuda-graphs on|off]\n"
               "         [--hosts ADDR,ADDR | --hosts-file FILE] "
               "[--secret-file FILE]\n"
               "         [--slurm [--controller-host HOST] "
               "[--agents-per-node K]]\n");
  return 2;
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool parseInt(const std::string &text, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || v < 0)
    return false;
  out = v;
  return true;
}

/// "host=2,gpu=2" -> {{"host", 2}, {"gpu", 2}}.
Expected<std::vector<std::pair<std::string, int64_t>>>
parseShape(const std::string &text) {
  std::vector<std::pair<std::string, int64_t>> shape;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma - start);
    size_t eq = item.find('=');
    int64_t size = 0;
    if (eq == std::string::npos || eq == 0 ||
        !parseInt(item.substr(eq + 1), size) || size == 0)
      return Status(ErrorCode::Invalid,
                    "--procs: '" + item + "' is not NAME=SIZE (SIZE > 0)");
    shape.emplace_back(item.substr(0, eq), size);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return shape;
}

std::string shapeText(const plan::Program &program) {
  std::string text;
  for (const auto &d : program.root())
    text +=
        (text.empty() ? "" : ",") + d.name() + "=" + std::to_string(d.size());
  return text;
}

Expected<plan::Program> loadProgram(const Args &args) {
  if (!endsWith(args.program, ".mlir") && !endsWith(args.program, ".mlirbc"))
    return loadPlanFile(args.program);
  run::ExternalCompileOptions external;
  external.timeout = std::chrono::seconds(args.compileTimeoutSeconds);
  auto compile = run::choosePlanCompiler(args.monarchOpt, external);
  if (!compile.ok())
    return Status(ErrorCode::Invalid,
                  args.program + ": " + compile.status().message());
  CompileOptions options;
  options.entry = args.entry;
  options.optimize = args.optimize;
  options.pipelineOptions = args.pipelineOptions;
  options.freeIR = false; // the process ends after the run
  CompileResult compiled = (*compile)(args.program, options);
  if (!compiled.ok)
    return Status(ErrorCode::Invalid,
                  compiled.diagnostics.empty()
                      ? "compilation of " + args.program + " failed"
                      : compiled.diagnostics);
  return loadPlan(compiled.plan);
}

int runMain(int argc, char **argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h")
      return usage(""), 0;
    if (a == "--procs") {
      if (!value(args.procs))
        return usage("--procs needs a value");
    } else if (a == "--trace") {
      if (!value(args.trace))
        return usage("--trace needs a file");
    } else if (a == "--memory-cap") {
      int64_t cap = 0;
      if (!value(v) || !parseInt(v, cap))
        return usage("--memory-cap needs a byte count");
      args.memoryCap = static_cast<size_t>(cap);
    } else if (a == "--timeout") {
      if (!value(v) || !parseInt(v, args.timeoutSeconds) ||
          args.timeoutSeconds == 0)
        return usage("--timeout needs a number of seconds > 0");
    } else if (a == "--entry") {
      if (!value(args.entry))
        return usage("--entry needs a function name");
    } else if (a == "--no-optimize") {
      args.optimize = false;
    } else if (a == "--emit-plan") {
      if (!value(args.emitPlan))
        return usage("--emit-plan needs a file");
    } else if (a == "--monarch-opt") {
      if (!value(args.monarchOpt) || args.monarchOpt.empty())
        return usage("--monarch-opt needs the path of a monarch-opt");
    } else if (a == "--compile-timeout") {
      if (!value(v) || !parseInt(v, args.compileTimeoutSeconds) ||
          args.compileTimeoutSeconds == 0)
        return usage("--compile-timeout needs a number of seconds > 0");
    } else if (a == "--cuda-graphs") {
      std::string v;
      if (!value(v) || (v != "on" && v != "off"))
        return usage("--cuda-graphs needs on or off");
      args.cudaGraphs = v == "on";
    } else if (a == "--pipeline-options") {
      if (!value(args.pipelineOptions))
        return usage("--pipeline-options needs a value");
    } else if (a == "--hosts") {
      if (!value(args.hosts))
        return usage("--hosts needs HOST:PORT,...");
    } else if (a == "--hosts-file") {
      if (!value(args.hostsFile))
        return usage("--hosts-file needs a file");
    } else if (a == "--secret-file") {
      if (!value(args.secretFile))
        return usage("--secret-file needs a file (or - for stdin)");
    } else if (a == "--slurm") {
      args.slurm = true;
    } else if (a == "--controller-host") {
      if (!value(args.controllerHost))
        return usage("--controller-host needs a host");
    } else if (a == "--agents-per-node") {
      if (!value(v) || !parseInt(v, args.agentsPerNode) ||
          args.agentsPerNode == 0)
        return usage("--agents-per-node needs a number > 0");
    } else if (!a.empty() && a[0] == '-') {
      return usage("unknown option " + a);
    } else if (args.program.empty()) {
      args.program = a;
    } else {
      return usage("one program at a time");
    }
  }
  if (args.program.empty())
    return usage("no program given");
  if (!args.hosts.empty() + !args.hostsFile.empty() + args.slurm > 1)
    return usage("--hosts, --hosts-file and --slurm exclude each other");
  bool multiHost = !args.hosts.empty() || !args.hostsFile.empty() || args.slurm;
  if (multiHost && !args.slurm && args.secretFile.empty())
    return usage("--hosts and --hosts-file need --secret-file (the agents' "
                 "job secret)");

  auto program = loadProgram(args);
  if (!program.ok()) {
    std::fprintf(stderr, "monarch-run: %s\n",
                 program.status().message().c_str());
    return 2;
  }
  if (!args.emitPlan.empty()) {
    std::ofstream out(args.emitPlan, std::ios::binary | std::ios::trunc);
    if (!out || !program->SerializeToOstream(&out)) {
      std::fprintf(stderr, "monarch-run: cannot write %s\n",
                   args.emitPlan.c_str());
      return 2;
    }
    out.close();
    // Nothing else to do: skip freeing a large plan on the way out.
    std::fflush(stdout);
    std::_Exit(out ? 0 : 2);
  }
  ControllerOptions options;
  for (const auto &d : program->root())
    options.shape.emplace_back(d.name(), d.size());
  if (!args.procs.empty()) {
    auto shape = parseShape(args.procs);
    if (!shape.ok())
      return usage(shape.status().message());
    if (*shape != options.shape) {
      std::fprintf(stderr,
                   "monarch-run: the program was compiled for procs %s, "
                   "--procs says %s\n",
                   shapeText(*program).c_str(), args.procs.c_str());
      return 2;
    }
  }
  options.memoryCapBytes = args.memoryCap;
  options.cudaGraphs = args.cudaGraphs;
  options.timeout = std::chrono::seconds(args.timeoutSeconds);
  options.trace = !args.trace.empty();

  // Declared before the controller so that it outlives it.
  std::unique_ptr<host::AttachedHosts> hosts;
  if (multiHost) {
    host::HostSource source;
    if (!args.hosts.empty()) {
      auto listed = host::parseHostList(args.hosts);
      if (!listed.ok())
        return usage(listed.status().message());
      source.hosts = *listed;
    }
    source.hostsFile = args.hostsFile;
    source.secretFile = args.secretFile;
    source.slurm = args.slurm;
    source.controllerHost = args.controllerHost;
    source.agentsPerNode = static_cast<int>(args.agentsPerNode);
    host::HostMeshOptions meshOptions;
    meshOptions.dim = options.shape.front().first;
    auto attached = host::attachHosts(
        source, meshOptions, std::chrono::seconds(args.timeoutSeconds));
    if (!attached.ok()) {
      std::fprintf(stderr, "monarch-run: %s\n",
                   attached.status().message().c_str());
      return 2;
    }
    hosts = std::move(*attached);
    if (static_cast<int64_t>(hosts->mesh()->size()) !=
        options.shape.front().second) {
      std::fprintf(stderr,
                   "monarch-run: the program's host dim %s=%lld but there "
                   "are %zu hosts\n",
                   options.shape.front().first.c_str(),
                   static_cast<long long>(options.shape.front().second),
                   hosts->mesh()->size());
      return 2;
    }
    options.hosts = hosts->mesh();
  }

  auto controller = Controller::start(options);
  if (!controller.ok()) {
    std::fprintf(stderr, "monarch-run: cannot start workers: %s\n",
                 controller.status().message().c_str());
    return 2;
  }

  run::FetchPrinter printer(*program, stdout);
  PlanRunObserver observer;
  observer.onFetch = [&](const plan::FetchReply &r) { printer.add(r); };
  // Each root failure is reported, but a failing instruction inside a loop
  // fails anew on every trip: past kReportsPerInstruction reports of one
  // instruction the rest are only counted, so stderr stays bounded.
  constexpr int64_t kReportsPerInstruction = 10;
  std::map<int64_t, int64_t> failuresOf;
  observer.onFailure = [&](const plan::Failure &f) {
    int64_t seen = ++failuresOf[f.instruction()];
    if (seen <= kReportsPerInstruction)
      std::fprintf(stderr, "monarch-run: error: %s\n",
                   run::describeFailure(f).c_str());
    if (seen == kReportsPerInstruction)
      std::fprintf(stderr,
                   "monarch-run: further failures of instruction #%lld are "
                   "counted, not reported\n",
                   static_cast<long long>(f.instruction()));
  };
  // Which worker is stuck, and when it is back (docs/runtime.md, Liveness).
  observer.onLiveness = [](const ControllerEvent &e) {
    std::fprintf(stderr, "monarch-run: %s\n", e.message.c_str());
  };
  // Progress on long runs only: after 2 s, at most once a second.
  auto started = std::chrono::steady_clock::now();
  auto lastProgress = started;
  observer.onProgress = [&](int64_t done, int64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (now - started < std::chrono::seconds(2) ||
        now - lastProgress < std::chrono::seconds(1))
      return;
    lastProgress = now;
    std::fprintf(stderr, "monarch-run: %lld%% (%lld/%lld instructions)\n",
                 static_cast<long long>(100 * done / total),
                 static_cast<long long>(done), static_cast<long long>(total));
  };
  int64_t n = program->instructions_size();
  auto result =
      runPlan(**controller, *program, observer, n >= 2000 ? n / 20 : 0);
  for (const auto &[instruction, count] : failuresOf)
    if (count > kReportsPerInstruction)
      std::fprintf(stderr,
                   "monarch-run: instruction #%lld failed %lld times in all\n",
                   static_cast<long long>(instruction),
                   static_cast<long long>(count));
  int rc = 0;
  if (!result.ok()) {
    printer.flush();
    std::fprintf(stderr, "monarch-run: %s\n",
                 result.status().message().c_str());
    rc = result.status().code() == ErrorCode::Timeout ? 3 : 2;
  } else {
    printer.flush();
    for (const auto &failure : result->procFailures)
      std::fprintf(stderr, "monarch-run: %s\n", failure.c_str());
    if (!result->procFailures.empty() || printer.failed() > 0)
      rc = 1;
    if (!args.trace.empty() &&
        !run::writeChromeTrace(args.trace, *program, *result)) {
      std::fprintf(stderr, "monarch-run: cannot write %s\n",
                   args.trace.c_str());
      rc = rc ? rc : 2;
    }
  }
  if (Status s = (*controller)->stop(); !s.isOk() && rc == 0)
    std::fprintf(stderr, "monarch-run: stopping workers: %s\n",
                 s.message().c_str());
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  // An allocation that fails (a plan asking for more than the machine has)
  // is an error with exit status 2, never an abort.
  try {
    return runMain(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "monarch-run: out of memory\n");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "monarch-run: %s\n", e.what());
  }
  return 2;
}
