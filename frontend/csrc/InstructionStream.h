//===- InstructionStream.h - A session's instructions, built in C++ -*- C++
//-*-===//
//
// The hot half of the Python frontend's eager path (docs/python.md, "How
// capture is fast"): every captured op becomes one plan Instruction, and
// building protobuf messages from Python costs ~17 us an op. Here the frontend
// defines, once per op signature, a *template* -- a serialized plan.CallOp
// whose tensor arguments and results are placeholders -- and then issues each
// op as (template id, mesh, stream, location id, input refs, result refs):
//
//   InstructionStream s(sink);                   // the workers, or a recorder
//   int64_t t = s.defineOp(callOpBytes, resultTypes);
//   int64_t loc = s.location("prog.py:12");
//   int64_t id = s.op(t, mesh, stream, loc, {x, w}, {y});
//   s.deleteRef(x, mesh, stream);                // batched, after every use
//   s.flush();                                   // fetch, wait, stop
//
// A placeholder is a negative ref: Value.ref = -(k+1) names input k (also
// inside ref lists and value lists), CallOp.results[j] = -(j+1) result j.
//
// Instructions are batched: a batch goes to the sink when it holds
// `maxBatch` instructions, on flush(), or at most `maxDelay` after its first
// instruction (a background thread), so an op issued from a notebook reaches
// the workers within a millisecond while a loop of ops is one message per
// batch. Batches are sent in issue order. Deleted refs are sent as DeleteRefs
// after the instructions of the batch they were dropped in (a ref is never
// reused, so deleting later is always safe).
//
// The sink is a Controller (eager) or nothing: then the stream records every
// instruction, with the local types of the refs they define and the
// derivation of every mesh, as a TracedProgram (trace.proto) for
// monarch-opt to import -- the same instructions eager execution sends, so
// tracing and eager share one path.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_FRONTEND_INSTRUCTIONSTREAM_H
#define MONARCH_FRONTEND_INSTRUCTIONSTREAM_H

#include "monarch/runtime/util/Status.h"
#include "monarch/tensor/plan.pb.h"
#include "monarch/tensor/trace.pb.h"

#include <google/protobuf/arena.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace monarch::frontend {

/// Where batches go: a callable sending one batch, or none (recording).
using BatchSink = std::function<Status(const plan::InstructionBatch &)>;

struct InstructionStreamOptions {
  size_t maxBatch = 256;
  std::chrono::microseconds maxDelay{500};
};

class InstructionStream {
public:
  /// `sink` null: record a TracedProgram instead of sending.
  explicit InstructionStream(BatchSink sink,
                             InstructionStreamOptions options = {});
  ~InstructionStream();
  InstructionStream(const InstructionStream &) = delete;
  InstructionStream &operator=(const InstructionStream &) = delete;

  bool recording() const { return !sink; }

  /// A CallOp template (see the header comment) and the local types of its
  /// results (recorded while tracing). Returns its id, or an error for bytes
  /// that are not a CallOp or placeholders out of range.
  Expected<int64_t> defineOp(const std::string &callOp,
                             std::vector<plan::TensorMeta> resultTypes);

  /// Interns a source location ("file:line"); the id names it in op().
  int64_t location(const std::string &text);

  /// One op from a template: returns its instruction id. `inputs` and
  /// `results` fill the template's placeholders. With `full`, a batch that
  /// became full is not sent here: `*full` says so and the caller flush()es
  /// (the Python binding appends with the GIL held and lets it go only to
  /// send).
  Expected<int64_t> op(int64_t templateId, int64_t mesh, int64_t stream,
                       int64_t locationId, const std::vector<int64_t> &inputs,
                       const std::vector<int64_t> &results,
                       bool *full = nullptr);

  /// Any other instruction, serialized by the caller; its id is assigned
  /// here and returned. While recording, `types` are the local types of the
  /// refs it defines.
  Expected<int64_t> raw(const std::string &instruction,
                        const std::vector<plan::RefType> &types = {});

  /// The ref is no longer used: a DeleteRefs goes out with the next batch.
  void deleteRef(int64_t ref, int64_t mesh, int64_t stream);

  /// Sends everything pending now (a no-op while recording).
  Status flush();

  // -- bodies of compiled steps (docs/python.md "Compiled steps") --------
  /// Starts recording a body: until endBody(), op() and raw() append to it
  /// instead of the stream -- except create_mesh, create_stream and
  /// define_recording, which always go to the stream (a mesh or stream is
  /// created once; definitions precede calls). Refs numbered from
  /// `firstLocalRef` on belong to the body. Deleting a ref from before the
  /// body is deferred to its end: the body may read it. Bodies nest.
  void beginBody(int64_t firstLocalRef);

  /// A ref and where it lives (as deleteRef names it).
  struct Placed {
    int64_t ref, mesh, stream;
  };
  struct EndedBody {
    /// The refs the body uses without defining them, in order of first use.
    std::vector<int64_t> formals;
    /// Formals deleted while the body was recorded: the caller now owns
    /// them (a call reads them), their deletes were not sent.
    std::vector<Placed> orphans;
    /// The ids of the body's fetches, in body order (replies name them).
    std::vector<int64_t> fetches;
    /// The body with its refs, borrows and ids renumbered in order of
    /// appearance: equal for two traces that issue the same program.
    std::string canonical;
    /// Whether a DefineRecording was issued (not when `canonical` equals
    /// the `previous` one passed in).
    bool defined = false;
  };
  /// Ends the innermost body as recording `id` with `results` (refs the
  /// body defines; every call binds them, they stay valid after it). Refs in
  /// [firstLocalRef, endLocalRef) other than results live only inside
  /// calls: deleting one is never sent. When `previous` equals the body's
  /// canonical form, nothing is defined (the caller calls the recording
  /// that has it).
  /// `formals`, when given, are the recording's formals in that order
  /// instead of the refs it uses in order of first use: a superset of those
  /// (a loop's recording takes every carried value, used or not).
  Expected<EndedBody>
  endBody(int64_t id, const std::vector<int64_t> &results, int64_t endLocalRef,
          const std::optional<std::string> &previous,
          const std::optional<std::vector<int64_t>> &formals = std::nullopt);
  /// Drops the innermost body (the step raised while it was recorded).
  void abortBody(int64_t endLocalRef);
  int64_t bodyDepth() const;
  /// Instructions in the innermost body so far (0 without one).
  int64_t bodySize() const;
  /// One call of a defined recording (mesh 0, stream 0): the hot path of a
  /// compiled step.
  Expected<int64_t> callRecording(int64_t recording,
                                  const std::vector<int64_t> &actuals,
                                  const std::vector<int64_t> &results);

  /// A loop of a defined recording (mesh 0, stream 0; plan.proto's Loop
  /// says what its fields mean): a traced `monarch.range`.
  Expected<int64_t> loop(const plan::Loop &loop);

  /// Stops the background thread after a last flush; later calls fail.
  Status close();

  // -- recording ----------------------------------------------------------
  /// The root mesh and streams the recorded program starts from.
  void declare(const plan::Program &program);
  void meshOrigin(const plan::MeshOrigin &origin);
  /// The argument list of an ATen op the program calls (for the import to
  /// place keyword arguments and fill in defaults).
  void opSchema(const plan::OpSchema &schema);
  /// Everything recorded so far, as a TracedProgram named `entry`.
  plan::TracedProgram traced(const std::string &entry) const;

  /// Instructions issued by op() and raw() so far (the DeleteRefs this
  /// stream adds do not count).
  int64_t issued() const;

private:
  struct Template {
    plan::CallOp call;
    /// Where input placeholders are: a path into call.args / call.kwargs.
    std::vector<std::pair<std::vector<int32_t>, int64_t>> inputSlots;
    int64_t inputs = 0;  ///< number of distinct inputs referenced
    int64_t results = 0; ///< number of result placeholders
    std::vector<plan::TensorMeta> resultTypes;
  };

  plan::Instruction *append(std::unique_lock<std::mutex> &lock,
                            bool toStream = false);
  bool localRef(int64_t ref) const;
  /// After an append: whether the batch is full (the caller flushes).
  bool noteAppendedLocked();
  Status errorLocked() const;
  /// A batch on an arena of its own: every message and string of an op
  /// appended to it is a bump allocation, and all of them go at once when
  /// the batch has been sent (an op's protobuf copies were most of its
  /// append, malloc and free included).
  struct Batch {
    std::unique_ptr<google::protobuf::Arena> arena;
    plan::InstructionBatch *batch = nullptr;
  };
  static Batch newBatch();
  /// Moves the pending batch out (with its deletes) for sending.
  Batch takeLocked();
  Status send(Batch batch);
  void flusherLoop();

  BatchSink sink;
  InstructionStreamOptions options;

  mutable std::mutex mu;
  std::condition_variable wake;
  Batch pending = newBatch();
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> pendingDeletes;
  std::optional<std::chrono::steady_clock::time_point> firstPending;
  int64_t nextId = 1;
  int64_t issuedCount = 0;
  std::optional<Status> failed; ///< a send failed: every later call fails
  bool closed = false;

  std::vector<Template> templates;
  std::vector<std::string> locations;
  std::unordered_map<std::string, int64_t> locationIds;

  /// Batches go out one at a time, in the order they were taken.
  std::mutex sendMu;
  std::thread flusher;

  // Recording.
  plan::Program program;
  std::vector<plan::RefType> refTypes;
  std::unordered_set<int64_t> typedRefs;
  std::vector<plan::MeshOrigin> origins;
  std::vector<plan::OpSchema> schemas;

  // Bodies being recorded (innermost last); the refs of ended ones that
  // live only inside calls; deletes deferred to a body's end.
  struct Body {
    int64_t firstLocal;
    plan::Recording recording;
  };
  std::vector<Body> bodies;
  std::vector<std::pair<int64_t, int64_t>> localRanges;
  std::unordered_set<int64_t> boundResults;
  std::vector<Placed> deferredDeletes;
  void releaseDeferredLocked(const std::unordered_set<int64_t> &keep,
                             std::vector<Placed> *orphans);
  /// Appends an instruction of mesh 0 and stream 0 (the body's instructions
  /// name their own) that `fill` completes; its id.
  Expected<int64_t>
  appendOnRoot(const std::function<void(plan::Instruction &)> &fill);
};

} // namespace monarch::frontend

#endif // MONARCH_FRONTEND_INSTRUCTIONSTREAM_H
