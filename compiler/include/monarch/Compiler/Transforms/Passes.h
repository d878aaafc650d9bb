//===- Passes.h - Passes of the monarch compiler ----------------*- C++ -*-===//
#ifndef MONARCH_COMPILER_TRANSFORMS_PASSES_H
#define MONARCH_COMPILER_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"
#include "monarch/Dialect/Monarch/IR/MonarchDialect.h"

#include <memory>

namespace monarch {

#define GEN_PASS_DECL
#include "monarch/Compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "monarch/Compiler/Transforms/Passes.h.inc"

/// Registers `monarch-default-pipeline` (DefaultPipeline.cpp).
void registerMonarchPipelines();

} // namespace monarch

#endif // MONARCH_COMPILER_TRANSFORMS_PASSES_H
