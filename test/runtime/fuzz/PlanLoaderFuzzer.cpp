//===- PlanLoaderFuzzer.cpp - libFuzzer target for the plan loader --------===//
//
// Feeds arbitrary bytes to loadPlan, what monarch-run and every tensor
// worker run on a plan before anything executes: parse, magic, version and
// the structural checks. It must never crash, abort or allocate without
// bound (a root mesh of 2^40 ranks once ended in std::bad_alloc, one of
// 2^31 - 1 took 17 GB): every bad plan is an error value. The seed corpus
// holds plans lowered from the compiler's tests.
//
//===----------------------------------------------------------------------===//
#include "monarch/tensor/Plan.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto plan = monarch::tensor::loadPlan(
      std::string_view(reinterpret_cast<const char *>(data), size));
  if (plan.ok()) {
    // What workers derive from an accepted plan must be cheap too.
    for (const auto &m : plan->meshes())
      (void)monarch::tensor::meshViewOf(m);
  }
  return 0;
}
