//===- monarch-tensor-worker - The tensor worker process ------------------===//
//
// Started by the controller (spawnProcs with a bootstrap pipe), never by
// hand: serves the TensorWorker actor (runtime/tensor TensorWorker.h).
//
//===----------------------------------------------------------------------===//
#include "monarch/runtime/proc/Worker.h"
#include "monarch/tensor/TensorWorker.h"

#include <cstdio>

int main() {
  if (!monarch::isWorkerProcess()) {
    std::fprintf(stderr, "monarch-tensor-worker is started by a monarch "
                         "controller (monarch-run, the Python frontend), "
                         "not by hand\n");
    return 2;
  }
  monarch::tensor::tuneHostAllocator();
  monarch::tensor::registerTensorWorker();
  return monarch::runWorker();
}
