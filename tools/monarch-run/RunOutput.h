//===- RunOutput.h - What monarch-run prints and writes ---------*- C++ -*-===//
//
// FetchPrinter prints fetched values in program order: the replies of a
// top-level Fetch (one per rank of its mesh) are held until every earlier
// top-level fetch is complete, then printed in rank order. Fetches inside
// recordings (loop bodies) print as they arrive. writeChromeTrace writes the
// Chrome/Perfetto JSON of a traced run: one process per rank, one thread per
// stream with the host-side spans ("cat": "host"), and on CUDA streams one
// more per stream, tid kDeviceTrackBase + stream, with the device-time spans
// ("cat": "gpu", args.clock "gpu"; tools/monarch-run/trace_events.py reads
// them).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TOOLS_MONARCH_RUN_RUNOUTPUT_H
#define MONARCH_TOOLS_MONARCH_RUN_RUNOUTPUT_H

#include "monarch/tensor/Controller.h"
#include "monarch/tensor/plan.pb.h"

#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace monarch::run {

/// "host=1, gpu=0" for a global rank of the root mesh.
std::string coordsOf(const plan::Program &program, int64_t rank);

class FetchPrinter {
public:
  FetchPrinter(const plan::Program &program, std::FILE *out);
  void add(const plan::FetchReply &reply);
  /// Prints whatever is still held (a run that ended early), marking the
  /// ranks that never replied.
  void flush();
  /// Fetched values that were errors.
  int failed() const { return failedCount; }

private:
  struct Pending {
    int64_t id;
    std::vector<int64_t> ranks;
    std::map<int64_t, plan::FetchReply> got;
  };
  void print(const plan::FetchReply &reply);
  void drain();

  const plan::Program &program;
  std::FILE *out;
  std::vector<Pending> order;
  std::unordered_map<int64_t, size_t> indexOf;
  size_t next = 0;
  int failedCount = 0;
};

/// "instruction #7 (at loc) failed on rank 2: message".
std::string describeFailure(const plan::Failure &failure);

/// The tid of a stream's device-time track: its own thread in the viewer,
/// since device spans overlap the host spans of the same stream.
constexpr int64_t kDeviceTrackBase = 1000000;

/// Writes `result.trace` as Chrome trace JSON; false if the file cannot be
/// written.
bool writeChromeTrace(const std::string &path, const plan::Program &program,
                      const tensor::PlanRunResult &result);

} // namespace monarch::run

#endif // MONARCH_TOOLS_MONARCH_RUN_RUNOUTPUT_H
