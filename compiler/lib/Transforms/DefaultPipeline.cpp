//===- DefaultPipeline.cpp - The default monarch pass pipeline -----------===//
//
// monarch-default-pipeline: make collectives async, schedule them to overlap
// with compute, optionally bucket them, run them on a comm stream with borrows,
// check the borrows, and mark the recordings a worker may run as CUDA graphs;
// each step can be turned off.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {

enum class CudaGraphs { Auto, Off };

struct DefaultPipelineOptions
    : public PassPipelineOptions<DefaultPipelineOptions> {
  Option<bool> asyncCollectives{
      *this, "async-collectives",
      llvm::cl::desc("Split reduces into reduce_start + wait"),
      llvm::cl::init(true)};
  Option<bool> scheduleOverlap{
      *this, "schedule-overlap",
      llvm::cl::desc("Overlap collectives with compute"), llvm::cl::init(true)};
  Option<uint64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Merge small all-reduces into buckets of at most this "
                     "many bytes (0: no bucketing)"),
      llvm::cl::init(0)};
  Option<bool> assignStreams{
      *this, "assign-streams",
      llvm::cl::desc("Run collectives on a comm stream with borrows"),
      llvm::cl::init(true)};
  Option<bool> assignToMesh{
      *this, "assign-to-mesh",
      llvm::cl::desc("With assign-streams: to_mesh transfers too"),
      llvm::cl::init(true)};
  Option<bool> assignOutOfPlace{
      *this, "assign-out-of-place",
      llvm::cl::desc("With assign-streams: out-of-place reduces too"),
      llvm::cl::init(true)};
  Option<bool> verifyBorrows{*this, "verify-borrows",
                             llvm::cl::desc("Check the borrow rules"),
                             llvm::cl::init(true)};
  Option<unsigned> maxInFlight{
      *this, "max-in-flight",
      llvm::cl::desc("Most collectives in flight (0: no limit)"),
      llvm::cl::init(0)};
  Option<std::string> device{*this, "device",
                             llvm::cl::desc("Device kind of the cost model"),
                             llvm::cl::init("h200")};
  Option<std::string> profile{*this, "profile",
                              llvm::cl::desc("JSON cost profile"),
                              llvm::cl::init("")};
  Option<std::string> stream{*this, "stream",
                             llvm::cl::desc("Stream for collectives"),
                             llvm::cl::init("comm")};
  Option<CudaGraphs> cudaGraphs{
      *this, "cuda-graphs",
      llvm::cl::desc("Mark recordings as CUDA-graph candidates "
                     "(monarch-mark-cuda-graphs)"),
      llvm::cl::init(CudaGraphs::Auto),
      llvm::cl::values(
          clEnumValN(CudaGraphs::Auto, "auto",
                     "workers capture the marked recordings they can"),
          clEnumValN(CudaGraphs::Off, "off", "every recording op by op"))};
};

void buildDefaultPipeline(OpPassManager &pm,
                          const DefaultPipelineOptions &options) {
  if (options.asyncCollectives)
    pm.addPass(monarch::createAsyncCollectives());
  if (options.scheduleOverlap) {
    monarch::ScheduleOverlapOptions o;
    o.maxInFlight = options.maxInFlight;
    o.device = options.device;
    o.profile = options.profile;
    pm.addPass(monarch::createScheduleOverlap(o));
  }
  if (options.bucketBytes) {
    monarch::BucketCollectivesOptions o;
    o.maxBytes = options.bucketBytes;
    pm.addPass(monarch::createBucketCollectives(o));
  }
  if (options.assignStreams) {
    monarch::AssignStreamsOptions o;
    o.stream = options.stream;
    o.toMesh = options.assignToMesh;
    o.outOfPlace = options.assignOutOfPlace;
    pm.addPass(monarch::createAssignStreams(o));
  }
  if (options.verifyBorrows)
    pm.addPass(monarch::createVerifyBorrows());
  if (options.cudaGraphs == CudaGraphs::Auto)
    pm.addPass(monarch::createMarkCudaGraphs());
}

} // namespace

void monarch::registerMonarchPipelines() {
  PassPipelineRegistration<DefaultPipelineOptions>(
      "monarch-default-pipeline",
      "The default monarch pipeline: async collectives, overlap scheduling, "
      "stream assignment with borrows, borrow verification, CUDA-graph "
      "candidates",
      buildDefaultPipeline);
}
