//===- monarch-worker - The process behind every proc ---------------------===//
//
// Started by a proc launcher (spawnProcs) with its bootstrap on a pipe; see
// monarch/runtime/proc/Worker.h. Actor classes come from the libraries the
// bootstrap names or are linked in.
//
//===----------------------------------------------------------------------===//
#include "monarch/runtime/proc/Worker.h"

int main() { return monarch::runWorker(); }
