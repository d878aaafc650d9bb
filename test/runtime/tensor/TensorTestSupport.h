//===- TensorTestSupport.h - Tensors <-> plan values in tests --*- C++ -*-===//
#ifndef MONARCH_TEST_RUNTIME_TENSOR_TENSORTESTSUPPORT_H
#define MONARCH_TEST_RUNTIME_TENSOR_TENSORTESTSUPPORT_H

#include "monarch/tensor/PlanBuilder.h"

#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <vector>

namespace monarch::tensor::testing {

namespace plan = monarch::plan;

/// A fetched value as a CPU tensor.
inline at::Tensor toTensor(const plan::TensorData &d) {
  static const std::map<plan::DType, at::ScalarType> types{
      {plan::FLOAT32, at::kFloat}, {plan::FLOAT64, at::kDouble},
      {plan::INT64, at::kLong},    {plan::INT32, at::kInt},
      {plan::BOOL, at::kBool},     {plan::UINT8, at::kByte}};
  std::vector<int64_t> shape(d.shape().begin(), d.shape().end());
  auto t = at::empty(shape, at::TensorOptions().dtype(types.at(d.dtype())));
  std::memcpy(t.data_ptr(), d.data().data(), d.data().size());
  return t;
}

/// A constant plan argument holding `t` (float32, or int64 for long).
inline plan::Value constant(const at::Tensor &t) {
  at::Tensor c = t.contiguous();
  plan::DType dt = c.scalar_type() == at::kLong ? plan::INT64 : plan::FLOAT32;
  return val::tensor(dt, c.sizes().vec(), c.data_ptr(),
                     c.numel() * c.element_size());
}

} // namespace monarch::tensor::testing

#endif // MONARCH_TEST_RUNTIME_TENSOR_TENSORTESTSUPPORT_H
