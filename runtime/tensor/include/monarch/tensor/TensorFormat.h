//===- TensorFormat.h - Printing fetched tensors without torch --*- C++ -*-===//
//
// The controller and monarch-run print fetched values but never link torch,
// so TensorData (dtype, shape, raw bytes) is formatted here: one line, MLIR
// type first, then nested lists, e.g.
//   tensor<2x2xf32> [[1, 2.5], [3, 4]]
//   tensor<i64> 7
// Floats print with 6 significant digits (%g). Past `maxElements` values the
// innermost lists are cut with "...".
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_TENSORFORMAT_H
#define MONARCH_TENSOR_TENSORFORMAT_H

#include "monarch/tensor/plan.pb.h"

#include <string>

namespace monarch::tensor {

/// "f32", "i64", "i1", "bf16", ... (MLIR element type spelling).
const char *dtypeName(plan::DType dtype);

std::string formatTensor(const plan::TensorData &tensor,
                         size_t maxElements = 1000);

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_TENSORFORMAT_H
