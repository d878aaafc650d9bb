//===- MonarchDialect.cpp - The monarch dialect and its attributes -------===//

#include "monarch/Dialect/Monarch/IR/MonarchDialect.h"
#include "monarch/Dialect/Monarch/IR/MonarchAttrs.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"
#include "monarch/Dialect/Monarch/IR/MonarchTypes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace monarch;

#include "monarch/Dialect/Monarch/IR/MonarchOpsDialect.cpp.inc"

#include "monarch/Dialect/Monarch/IR/MonarchEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "monarch/Dialect/Monarch/IR/MonarchAttrs.cpp.inc"

void MonarchDialect::initialize() {
  registerTypes();
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "monarch/Dialect/Monarch/IR/MonarchOps.cpp.inc"
      >();
}

void MonarchDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "monarch/Dialect/Monarch/IR/MonarchAttrs.cpp.inc"
      >();
}

LogicalResult ScalarAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 Attribute value) {
  if (isa<IntegerAttr, FloatAttr, BoolAttr>(value))
    return success();
  return emitError() << "#monarch.scalar holds an integer, float or bool, got "
                     << value;
}
