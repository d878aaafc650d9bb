//===- LowerToPlan.h - The dialect to the plan -----------------*- C++ -*-===//
//
// Lowers a module of the monarch dialect (with func, scf and arith) to the
// executable plan of docs/plan.md (`monarch.plan.Program`): every mesh value
// becomes its static view of the one root mesh, every distributed tensor a
// ref, deleted right after its last use; `scf.for` loops with constant bounds
// and called functions become recordings, defined once and called per
// iteration or call. Anything the lowering cannot translate faithfully is an
// error diagnostic naming the op.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_LOWERING_LOWERTOPLAN_H
#define MONARCH_COMPILER_LOWERING_LOWERTOPLAN_H

#include "monarch/tensor/plan.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <memory>

namespace monarch {

/// Lowers the function `entry` of `module` (and the functions it calls) to a
/// plan. When `entry` is empty, the function named "main" is used, or the only
/// function of the module. Errors are reported as diagnostics on the offending
/// op; the module is not modified.
mlir::FailureOr<plan::Program> lowerToPlan(mlir::ModuleOp module,
                                           llvm::StringRef entry = {});

/// The same, also recording the local type of every ref that holds an IR
/// value (what a TracedProgram adds to the plan: ExportTrace.h). Refs of
/// dynamic shape or of no plan dtype are left out.
mlir::FailureOr<plan::Program>
lowerToPlan(mlir::ModuleOp module, llvm::StringRef entry,
            std::map<int64_t, plan::TensorMeta> &refTypes);

/// Prints `program` in the readable text form documented in docs/plan.md
/// ("Lowering from the dialect"): one line per instruction, e.g.
///   %3 = aten "aten::mm"(%1, %2) on mesh#1  // #4
void printPlan(const plan::Program &program, llvm::raw_ostream &os);

#define GEN_PASS_DECL
#include "monarch/Compiler/Lowering/LoweringPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "monarch/Compiler/Lowering/LoweringPasses.h.inc"

} // namespace monarch

#endif // MONARCH_COMPILER_LOWERING_LOWERTOPLAN_H
