//===- MonarchOps.h - Ops of the monarch dialect ----------------*- C++ -*-===//
#ifndef MONARCH_DIALECT_MONARCH_IR_MONARCHOPS_H
#define MONARCH_DIALECT_MONARCH_IR_MONARCHOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "monarch/Dialect/Monarch/IR/MonarchAttrs.h"
#include "monarch/Dialect/Monarch/IR/MonarchDialect.h"
#include "monarch/Dialect/Monarch/IR/MonarchTypes.h"
#include "monarch/mesh/MeshView.h"

#define GET_OP_CLASSES
#include "monarch/Dialect/Monarch/IR/MonarchOps.h.inc"

#endif // MONARCH_DIALECT_MONARCH_IR_MONARCHOPS_H
