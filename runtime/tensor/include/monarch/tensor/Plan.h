//===- Plan.h - Loading and checking executable plans -----------*- C++ -*-===//
//
// A plan is a `monarch.plan.Program` protobuf (runtime/tensor/proto/plan.proto,
// docs/plan.md). Loading checks, in order: that the bytes parse, the magic,
// that the schema version is not newer than this runtime's, and structural
// validity (ids, meshes, streams, refs defined before use, recordings).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_PLAN_H
#define MONARCH_TENSOR_PLAN_H

#include "monarch/mesh/MeshView.h"
#include "monarch/tensor/Status.h"
#include "monarch/tensor/plan.pb.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace monarch::tensor {

/// "MONP": the first field of every plan.
inline constexpr uint32_t kPlanMagic = 0x4d4f4e50;
/// The schema version this runtime writes and the newest it reads. Version 2
/// added the `loop` instruction; the compiler writes the lowest version a
/// plan needs (1 without loops), so older runtimes keep running those.
inline constexpr uint32_t kPlanVersion = 2;
/// The most trips a `loop` may make, 2^31 - 1: far beyond any training job
/// (a million steps are 0.05% of it), while a count past it -- a corrupted
/// or mistyped one -- is refused at load rather than run for months.
inline constexpr int64_t kMaxLoopTrips = plan::Loop::MAX_TRIPS;

/// Parses and validates serialized plan bytes.
Expected<plan::Program> loadPlan(std::string_view bytes);
/// Reads a plan file and loads it.
Expected<plan::Program> loadPlanFile(const std::string &path);
/// Header (magic + version) and structural checks of a parsed plan.
Status validatePlan(const plan::Program &program);

/// The view a plan mesh declares; Invalid ("mesh N: ...") when it is not one.
Expected<mesh::MeshView> meshViewOf(const plan::Mesh &m);

/// How an instruction touches a ref.
enum class RefRole {
  Read,   ///< read only
  Write,  ///< read and mutated in place (ATen `Tensor(a!)`, in-place reduce)
  Define, ///< a new ref bound by the instruction
  Delete, ///< freed by the instruction
};

/// Calls `fn` for every ref an instruction names, with its role. ATen
/// arguments are reported as Read: whether an operator mutates one is known
/// only from its schema, on the worker. A CallRecording's actuals are Read and
/// its results Define; a Loop's carried and captured refs are Read, its
/// consumed ones then Delete, its results Define; a DefineRecording's body is
/// not visited.
void visitRefs(const plan::Instruction &inst,
               const std::function<void(int64_t ref, RefRole role)> &fn);
/// Calls `fn` for every ref inside one argument value (refs, ref lists,
/// nested lists and optionals) with the given role.
void visitValueRefs(const plan::Value &value, RefRole role,
                    const std::function<void(int64_t ref, RefRole role)> &fn);
/// Rewrites every ref an instruction names (same coverage as visitRefs,
/// including a nested DefineRecording's body: no).
void mapRefs(plan::Instruction &inst,
             const std::function<int64_t(int64_t ref)> &fn);

/// What is wrong with `loop` as a loop over `rec` (trips out of range,
/// counts that do not match the recording, carried values with no trips,
/// an induction variable past int64, consumed refs that are not carried
/// only); empty when nothing. Meshes, streams and refs are the caller's to
/// check.
std::string loopError(const plan::Loop &loop, const plan::Recording &rec);

/// "aten::add.Tensor" for (name "aten::add", overload "Tensor").
std::string opName(const plan::CallOp &op);
/// One-word name of the instruction's kind, e.g. "call_op".
const char *kindName(const plan::Instruction &inst);

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_PLAN_H
