//===- Status.h - The runtime's Status in the tensor engine -----*- C++ -*-===//
//
// Exceptions from torch, Gloo or protobuf are caught where they happen (an
// instruction, a collective call, a plan load) and travel as the runtime's
// Status / Expected<T> from there on; they never cross a thread or a module
// boundary.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_STATUS_H
#define MONARCH_TENSOR_STATUS_H

#include "monarch/runtime/util/Status.h"

namespace monarch::tensor {
using monarch::ErrorCode;
using monarch::Expected;
using monarch::Status;
} // namespace monarch::tensor

#endif // MONARCH_TENSOR_STATUS_H
