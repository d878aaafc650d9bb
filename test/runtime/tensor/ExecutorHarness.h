//===- ExecutorHarness.h - One executor with its callbacks collected -*- C++
//-*-===//
//
// Shared by the executor suites (CPU and CUDA): runs plans on one Executor
// in this process and keeps its failures, fetch replies (with arrival
// times), statuses and trace events for assertions.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TEST_RUNTIME_TENSOR_EXECUTORHARNESS_H
#define MONARCH_TEST_RUNTIME_TENSOR_EXECUTORHARNESS_H

#include "TensorTestSupport.h"

#include "monarch/tensor/Executor.h"
#include "monarch/tensor/Plan.h"

#include <algorithm>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace monarch::tensor::testing {

/// An executor with callbacks collected for assertions.
class Harness {
public:
  explicit Harness(ExecutorOptions options = {}, bool trace = false,
                   std::chrono::seconds timeout = std::chrono::seconds(10)) {
    if (options.rootShape.empty())
      options.rootShape = {{"x", 1}};
    options.timeout = timeout;
    timeoutValue = timeout;
    ExecutorCallbacks cb;
    cb.onFailure = [this](const plan::Failure &f) {
      std::lock_guard<std::mutex> lock(mutex);
      failures.push_back(f);
    };
    cb.onFetch = [this](const plan::FetchReply &r) {
      std::lock_guard<std::mutex> lock(mutex);
      fetches[r.instruction()] = r;
      arrived[r.instruction()] = std::chrono::steady_clock::now();
    };
    cb.onStatus = [this](int64_t id) {
      std::lock_guard<std::mutex> lock(mutex);
      statuses.push_back(id);
      fetchOrderAtStatus = fetches.size();
    };
    cb.onDebug = [this](const std::string &line) {
      std::lock_guard<std::mutex> lock(mutex);
      debugLines.push_back(line);
    };
    if (trace)
      cb.onTrace = [this](const plan::TraceEvent &e) {
        // Callbacks run one at a time: a second one inside would see 1.
        if (inTrace.fetch_add(1) != 0)
          concurrentTraces = true;
        std::this_thread::yield();
        {
          std::lock_guard<std::mutex> lock(mutex);
          traces.push_back(e);
        }
        inTrace.fetch_sub(1);
      };
    executor = std::make_unique<Executor>(std::move(options), std::move(cb));
  }

  std::chrono::milliseconds timeout() const { return timeoutValue; }

  /// Loads (validating unless told not to) and runs a plan to completion.
  void run(const PlanBuilder &b, bool validate = true) {
    plan::Program program = b.program();
    if (validate) {
      auto loaded = loadPlan(b.serialize());
      ASSERT_TRUE(loaded.ok()) << loaded.status().message();
      program = loaded.value();
    }
    ASSERT_TRUE(executor->run(program).isOk());
    ASSERT_TRUE(executor->waitIdle(2 * timeout()));
  }

  at::Tensor value(int64_t fetch) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = fetches.find(fetch);
    if (it == fetches.end()) {
      ADD_FAILURE() << "no reply for fetch " << fetch;
      return at::Tensor();
    }
    if (!it->second.has_value()) {
      ADD_FAILURE() << "fetch " << fetch
                    << " is an error: " << it->second.error().message();
      return at::Tensor();
    }
    return toTensor(it->second.value());
  }

  plan::Failure error(int64_t fetch) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = fetches.find(fetch);
    if (it == fetches.end() || !it->second.has_error()) {
      ADD_FAILURE() << "fetch " << fetch << " is not an error";
      return {};
    }
    return it->second.error();
  }

  std::vector<plan::Failure> failuresFor(int64_t instruction) {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<plan::Failure> out;
    for (const auto &f : failures)
      if (f.instruction() == instruction)
        out.push_back(f);
    return out;
  }

  /// Every failure, one per line (assertion messages).
  std::string allFailures() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string s;
    for (const auto &f : failures)
      s += "#" + std::to_string(f.instruction()) + ": " + f.message() + "\n";
    return s;
  }

  /// The id of the instruction last appended to `b`.
  static int64_t last(const PlanBuilder &b) {
    const auto &insts = b.program().instructions();
    return insts.Get(insts.size() - 1).id();
  }

  std::mutex mutex;
  std::vector<plan::Failure> failures;
  std::map<int64_t, plan::FetchReply> fetches;
  std::map<int64_t, std::chrono::steady_clock::time_point> arrived;
  std::vector<int64_t> statuses;
  size_t fetchOrderAtStatus = 0;
  std::vector<plan::TraceEvent> traces;
  std::vector<std::string> debugLines; ///< ExecutorCallbacks::onDebug's
  /// The debug lines that contain `text`.
  size_t debugCount(const std::string &text) {
    std::lock_guard<std::mutex> lock(mutex);
    return std::count_if(debugLines.begin(), debugLines.end(),
                         [&](const std::string &l) {
                           return l.find(text) != std::string::npos;
                         });
  }
  std::atomic<int> inTrace{0};
  std::atomic<bool> concurrentTraces{false};
  std::chrono::milliseconds timeoutValue;
  std::unique_ptr<Executor> executor;
};

} // namespace monarch::tensor::testing

#endif // MONARCH_TEST_RUNTIME_TENSOR_EXECUTORHARNESS_H
