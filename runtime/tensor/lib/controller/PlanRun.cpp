//===- PlanRun.cpp - Running a whole plan on a controller's workers -------===//

#include "monarch/tensor/Controller.h"

#include <algorithm>
#include <set>

namespace monarch::tensor {

Expected<PlanRunResult> runPlan(Controller &controller,
                                const plan::Program &program,
                                const PlanRunObserver &observer,
                                int64_t progressEvery) {
  if (Status s = controller.declare(program); !s.isOk())
    return s;

  // Status ids above every instruction id: progress marks, then the end.
  int64_t maxId = 0;
  for (const auto &inst : program.instructions())
    maxId = std::max(maxId, inst.id());
  auto statusAt = [](int64_t id) {
    plan::Instruction inst;
    inst.set_id(id);
    inst.mutable_request_status();
    return inst;
  };
  plan::InstructionBatch batch;
  int64_t marks = 0;
  const int64_t n = program.instructions_size();
  for (int64_t i = 0; i < n; ++i) {
    *batch.add_instructions() = program.instructions(i);
    if (progressEvery > 0 && (i + 1) % progressEvery == 0 && i + 1 < n)
      *batch.add_instructions() = statusAt(maxId + 1 + marks++);
  }
  const int64_t finalId = maxId + 1 + marks;
  *batch.add_instructions() = statusAt(finalId);
  if (Status s = controller.submit(batch); !s.isOk())
    return s;

  PlanRunResult result;
  // Every worker reports each status once; a mark counts when all have.
  std::vector<int64_t> statusCount(marks + 1, 0);
  int64_t marksDone = 0;
  const int64_t workers = controller.size();
  const auto timeout = controller.options().timeout;
  auto lastEvent = std::chrono::steady_clock::now();
  while (statusCount[marks] < workers) {
    auto event = controller.next(std::chrono::milliseconds(200));
    if (!event) {
      // The bound is on silence, not the whole run: long plans keep
      // reporting progress marks.
      if (std::chrono::steady_clock::now() - lastEvent > timeout)
        return Status(ErrorCode::Timeout,
                      "plan did not finish: no worker reported anything for " +
                          std::to_string(timeout.count()) + " ms");
      continue;
    }
    lastEvent = std::chrono::steady_clock::now();
    if (event->kind == ControllerEvent::Kind::ProcFailure) {
      result.procFailures.push_back(event->message);
      return result;
    }
    if (event->kind == ControllerEvent::Kind::ProcUnresponsive ||
        event->kind == ControllerEvent::Kind::ProcResponsive) {
      if (observer.onLiveness)
        observer.onLiveness(*event);
      continue;
    }
    const auto &w = event->worker;
    switch (w.kind_case()) {
    case plan::WorkerEvent::kFetch:
      if (observer.onFetch)
        observer.onFetch(w.fetch());
      result.fetches.push_back(w.fetch());
      break;
    case plan::WorkerEvent::kFailure:
      if (observer.onFailure)
        observer.onFailure(w.failure());
      result.failures.push_back(w.failure());
      break;
    case plan::WorkerEvent::kTrace:
      result.trace.push_back(w.trace());
      result.traceRanks.push_back(w.rank());
      break;
    case plan::WorkerEvent::kStatus: {
      int64_t mark = w.status() - maxId - 1;
      if (mark < 0 || mark > marks)
        break;
      ++statusCount[mark];
      if (mark < marks && statusCount[mark] == workers) {
        marksDone = std::max(marksDone, mark + 1);
        if (observer.onProgress)
          observer.onProgress(marksDone * progressEvery, n);
      }
      break;
    }
    default:
      break;
    }
  }
  return result;
}

} // namespace monarch::tensor
