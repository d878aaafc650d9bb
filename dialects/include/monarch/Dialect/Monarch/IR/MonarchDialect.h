//===- MonarchDialect.h - The monarch dialect -------------------*- C++ -*-===//
#ifndef MONARCH_DIALECT_MONARCH_IR_MONARCHDIALECT_H
#define MONARCH_DIALECT_MONARCH_IR_MONARCHDIALECT_H

#include "mlir/IR/Dialect.h"

#include "monarch/Dialect/Monarch/IR/MonarchOpsDialect.h.inc"

#endif // MONARCH_DIALECT_MONARCH_IR_MONARCHDIALECT_H
