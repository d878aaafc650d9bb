//===- MonarchTypes.h - Types of the monarch dialect ------------*- C++ -*-===//
#ifndef MONARCH_DIALECT_MONARCH_IR_MONARCHTYPES_H
#define MONARCH_DIALECT_MONARCH_IR_MONARCHTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Types.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#define GET_TYPEDEF_CLASSES
#include "monarch/Dialect/Monarch/IR/MonarchTypes.h.inc"

#endif // MONARCH_DIALECT_MONARCH_IR_MONARCHTYPES_H
