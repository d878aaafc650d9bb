//===- MonarchAttrs.h - Attributes of the monarch dialect -------*- C++ -*-===//
#ifndef MONARCH_DIALECT_MONARCH_IR_MONARCHATTRS_H
#define MONARCH_DIALECT_MONARCH_IR_MONARCHATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "monarch/Dialect/Monarch/IR/MonarchEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "monarch/Dialect/Monarch/IR/MonarchAttrs.h.inc"

#endif // MONARCH_DIALECT_MONARCH_IR_MONARCHATTRS_H
