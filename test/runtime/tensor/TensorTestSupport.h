//===- TensorTestSupport.h - Tensors <-> plan values in tests --*- C++ -*-===//
#ifndef MONARCH_TEST_RUNTIME_TENSOR_TENSORTESTSUPPORT_H
#define MONARCH_TEST_RUNTIME_TENSOR_TENSORTESTSUPPORT_H

#include "monarch/tensor/PlanBuilder.h"

#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <string>
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

/// A constant plan argument holding `t` (float32, float64 or int64).
inline plan::Value constant(const at::Tensor &t) {
  at::Tensor c = t.contiguous();
  plan::DType dt = c.scalar_type() == at::kLong     ? plan::INT64
                   : c.scalar_type() == at::kDouble ? plan::FLOAT64
                                                    : plan::FLOAT32;
  if (dt == plan::FLOAT32)
    c = c.to(at::kFloat);
  return val::tensor(dt, c.sizes().vec(), c.data_ptr(),
                     c.numel() * c.element_size());
}

/// A call_function of `name` on the root mesh and `stream`.
inline plan::Instruction &callFn(PlanBuilder &b, int64_t stream,
                                 const std::string &name,
                                 std::vector<plan::Value> args = {},
                                 std::vector<int64_t> results = {}) {
  auto &inst = b.add(0, stream);
  auto *c = inst.mutable_call_function();
  c->set_name(name);
  for (auto &a : args)
    *c->add_args() = a;
  for (int64_t r : results)
    c->add_results(r);
  return inst;
}

/// A borrow_create of `input` (owned by stream `from`) onto stream `to` on
/// the root mesh, with borrow id `id`; returns the id and the result ref.
struct BorrowIds {
  int64_t borrow, result;
};
inline BorrowIds borrow(PlanBuilder &b, int64_t id, int64_t input, int64_t from,
                        int64_t to, bool isMutable) {
  auto *bc = b.add(0, to).mutable_borrow_create();
  bc->set_borrow(id);
  bc->set_input(input);
  bc->set_from_stream(from);
  bc->set_mutable_(isMutable);
  int64_t r = b.ref();
  bc->set_result(r);
  return {id, r};
}

/// A borrow_drop of `id` on `stream`; returns the instruction id.
inline int64_t drop(PlanBuilder &b, int64_t id, int64_t stream) {
  auto &inst = b.add(0, stream, "model.py:40");
  inst.mutable_borrow_drop()->set_borrow(id);
  return inst.id();
}

} // namespace monarch::tensor::testing

#endif // MONARCH_TEST_RUNTIME_TENSOR_TENSORTESTSUPPORT_H
