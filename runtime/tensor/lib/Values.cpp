//===- Values.cpp - Plan values to IValues, tensors to bytes
//---------------===//

#include "Internal.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/Scalar.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace monarch::tensor::detail {

at::ScalarType toScalarType(plan::DType dtype) {
  switch (dtype) {
  case plan::UINT8:
    return at::kByte;
  case plan::INT8:
    return at::kChar;
  case plan::INT16:
    return at::kShort;
  case plan::INT32:
    return at::kInt;
  case plan::INT64:
    return at::kLong;
  case plan::FLOAT16:
    return at::kHalf;
  case plan::FLOAT32:
    return at::kFloat;
  case plan::FLOAT64:
    return at::kDouble;
  case plan::BOOL:
    return at::kBool;
  case plan::BFLOAT16:
    return at::kBFloat16;
  case plan::COMPLEX64:
    return at::kComplexFloat;
  case plan::COMPLEX128:
    return at::kComplexDouble;
  default:
    throw std::runtime_error("unspecified or unknown dtype " +
                             std::to_string(static_cast<int>(dtype)));
  }
}

plan::DType toDType(at::ScalarType type) {
  switch (type) {
  case at::kByte:
    return plan::UINT8;
  case at::kChar:
    return plan::INT8;
  case at::kShort:
    return plan::INT16;
  case at::kInt:
    return plan::INT32;
  case at::kLong:
    return plan::INT64;
  case at::kHalf:
    return plan::FLOAT16;
  case at::kFloat:
    return plan::FLOAT32;
  case at::kDouble:
    return plan::FLOAT64;
  case at::kBool:
    return plan::BOOL;
  case at::kBFloat16:
    return plan::BFLOAT16;
  case at::kComplexFloat:
    return plan::COMPLEX64;
  case at::kComplexDouble:
    return plan::COMPLEX128;
  default:
    throw std::runtime_error(std::string("dtype ") + c10::toString(type) +
                             " has no plan equivalent");
  }
}

at::Tensor fromTensorData(const plan::TensorData &data) {
  std::vector<int64_t> shape(data.shape().begin(), data.shape().end());
  at::Tensor t =
      at::empty(shape, at::TensorOptions().dtype(toScalarType(data.dtype())));
  size_t bytes = t.numel() * t.element_size();
  if (bytes != data.data().size())
    throw std::runtime_error(
        "tensor constant holds " + std::to_string(data.data().size()) +
        " bytes but its shape and dtype need " + std::to_string(bytes));
  if (bytes)
    std::memcpy(t.data_ptr(), data.data().data(), bytes);
  return t;
}

std::string errorMessage(const std::exception &e) {
  if (const auto *c = dynamic_cast<const c10::Error *>(&e))
    return c->what_without_backtrace();
  return e.what();
}

void toTensorData(const at::Tensor &t, plan::TensorData *out) {
  at::Tensor c = t.detach().cpu().contiguous();
  out->set_dtype(toDType(c.scalar_type()));
  out->clear_shape();
  for (int64_t d : c.sizes())
    out->add_shape(d);
  out->set_data(c.data_ptr(), c.numel() * c.element_size());
}

c10::Device mapDevice(c10::Device device) {
  if (!device.is_cuda())
    return device;
  // One rank per GPU (as Monarch gives each worker one visible device):
  // every cuda index names this worker's GPU, so a plan written for
  // "cuda:0" places each rank's tensors on its own device.
  if (int d = processDevice(); d >= 0) {
    setCudaWanted(); // before any task using this value runs
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d));
  }
  if (at::detail::getCUDAHooks().hasCUDA())
    return device;
  static std::once_flag warned;
  std::call_once(warned, [] {
    std::fprintf(stderr, "monarch: warning: no GPU on this worker; tensors "
                         "requested on 'cuda' are placed on CPU\n");
  });
  return c10::Device(c10::kCPU);
}

bool isConstant(const plan::Value &v) {
  switch (v.kind_case()) {
  case plan::Value::kRef:
  case plan::Value::kRefList:
    return false;
  case plan::Value::kList:
    for (const auto &e : v.list().values())
      if (!isConstant(e))
        return false;
    return true;
  case plan::Value::kOptional:
    return !v.optional().has_value() || isConstant(v.optional().value());
  default:
    return true;
  }
}

namespace {

bool isNone(const plan::Value &v) {
  return v.kind_case() == plan::Value::kNone ||
         v.kind_case() == plan::Value::KIND_NOT_SET ||
         (v.kind_case() == plan::Value::kOptional && !v.optional().has_value());
}

[[noreturn]] void mismatch(const plan::Value &v, const c10::TypePtr &type) {
  throw std::runtime_error(
      "argument of kind '" +
      std::string(
          plan::Value::descriptor()->FindFieldByNumber(v.kind_case())->name()) +
      "' does not convert to schema type " + type->str());
}

c10::Scalar scalarOf(const plan::Value &v) {
  switch (v.kind_case()) {
  case plan::Value::kIntValue:
    return c10::Scalar(v.int_value());
  case plan::Value::kFloatValue:
    return c10::Scalar(v.float_value());
  case plan::Value::kBoolValue:
    return c10::Scalar(v.bool_value());
  case plan::Value::kScalar:
    switch (v.scalar().kind_case()) {
    case plan::Scalar::kIntValue:
      return c10::Scalar(v.scalar().int_value());
    case plan::Scalar::kFloatValue:
      return c10::Scalar(v.scalar().float_value());
    case plan::Scalar::kBoolValue:
      return c10::Scalar(v.scalar().bool_value());
    default:
      break;
    }
    break;
  default:
    break;
  }
  throw std::runtime_error("expected a scalar argument");
}

int64_t intOf(const plan::Value &v) {
  switch (v.kind_case()) {
  case plan::Value::kIntValue:
    return v.int_value();
  case plan::Value::kDtype:
    return static_cast<int64_t>(toScalarType(v.dtype()));
  case plan::Value::kLayout:
    return static_cast<int64_t>(v.layout());
  case plan::Value::kMemoryFormat:
    return static_cast<int64_t>(v.memory_format());
  case plan::Value::kScalar:
    if (v.scalar().kind_case() == plan::Scalar::kIntValue)
      return v.scalar().int_value();
    break;
  default:
    break;
  }
  throw std::runtime_error("expected an int argument");
}

at::Tensor tensorOf(const plan::Value &v, const RefLookup &lookup) {
  if (v.kind_case() == plan::Value::kRef)
    return lookup(v.ref());
  if (v.kind_case() == plan::Value::kTensor)
    return fromTensorData(v.tensor());
  throw std::runtime_error("expected a tensor ref argument");
}

/// The elements of a list-like value (RefList, ValueList, IntList...).
std::vector<plan::Value> elements(const plan::Value &v) {
  std::vector<plan::Value> out;
  switch (v.kind_case()) {
  case plan::Value::kList:
    out.assign(v.list().values().begin(), v.list().values().end());
    break;
  case plan::Value::kRefList:
    for (int64_t r : v.ref_list().refs()) {
      out.emplace_back();
      out.back().set_ref(r);
    }
    break;
  case plan::Value::kIntList:
    for (int64_t x : v.int_list().values()) {
      out.emplace_back();
      out.back().set_int_value(x);
    }
    break;
  case plan::Value::kFloatList:
    for (double x : v.float_list().values()) {
      out.emplace_back();
      out.back().set_float_value(x);
    }
    break;
  case plan::Value::kBoolList:
    for (bool x : v.bool_list().values()) {
      out.emplace_back();
      out.back().set_bool_value(x);
    }
    break;
  default:
    out.push_back(v);
  }
  return out;
}

c10::IValue listOf(const plan::Value &v, const c10::TypePtr &elem,
                   int64_t fixedSize, const RefLookup &lookup) {
  using K = c10::TypeKind;
  std::vector<plan::Value> items = elements(v);
  // `int[2] stride=1` style: one value broadcast to the fixed size.
  if (items.size() == 1 && fixedSize > 1 &&
      (v.kind_case() == plan::Value::kIntValue ||
       v.kind_case() == plan::Value::kFloatValue ||
       v.kind_case() == plan::Value::kBoolValue))
    items.assign(static_cast<size_t>(fixedSize), items.front());
  switch (elem->kind()) {
  case K::IntType: {
    c10::List<int64_t> l;
    for (const auto &e : items)
      l.push_back(intOf(e));
    return l;
  }
  case K::FloatType: {
    c10::List<double> l;
    for (const auto &e : items)
      l.push_back(scalarOf(e).toDouble());
    return l;
  }
  case K::BoolType: {
    c10::List<bool> l;
    for (const auto &e : items)
      l.push_back(scalarOf(e).toBool());
    return l;
  }
  case K::TensorType: {
    c10::List<at::Tensor> l;
    for (const auto &e : items)
      l.push_back(tensorOf(e, lookup));
    return l;
  }
  case K::OptionalType: {
    auto inner = elem->castRaw<c10::OptionalType>()->getElementType();
    if (inner->kind() == K::TensorType) {
      c10::List<c10::optional<at::Tensor>> l;
      for (const auto &e : items) {
        if (isNone(e))
          l.push_back(c10::nullopt);
        else
          l.push_back(tensorOf(e.kind_case() == plan::Value::kOptional
                                   ? e.optional().value()
                                   : e,
                               lookup));
      }
      return l;
    }
    break;
  }
  default:
    break;
  }
  c10::impl::GenericList l(elem);
  for (const auto &e : items)
    l.push_back(toIValue(e, elem, 0, lookup));
  return l;
}

} // namespace

c10::IValue toIValue(const plan::Value &v, const c10::TypePtr &type,
                     int64_t fixedSize, const RefLookup &lookup) {
  using K = c10::TypeKind;
  switch (type->kind()) {
  case K::OptionalType: {
    if (isNone(v))
      return c10::IValue();
    const plan::Value &inner =
        v.kind_case() == plan::Value::kOptional ? v.optional().value() : v;
    return toIValue(inner, type->castRaw<c10::OptionalType>()->getElementType(),
                    fixedSize, lookup);
  }
  case K::ListType:
    return listOf(v, type->castRaw<c10::ListType>()->getElementType(),
                  fixedSize, lookup);
  case K::TensorType:
    return tensorOf(v, lookup);
  case K::IntType:
    return intOf(v);
  case K::FloatType:
    return scalarOf(v).toDouble();
  case K::BoolType:
    if (v.kind_case() != plan::Value::kBoolValue)
      mismatch(v, type);
    return v.bool_value();
  case K::NumberType:
    return scalarOf(v);
  case K::StringType:
    if (v.kind_case() != plan::Value::kStringValue)
      mismatch(v, type);
    return v.string_value();
  case K::DeviceObjType:
    if (v.kind_case() != plan::Value::kDevice)
      mismatch(v, type);
    return mapDevice(c10::Device(v.device().spec()));
  default:
    return toIValue(v, lookup);
  }
}

c10::IValue toIValue(const plan::Value &v, const RefLookup &lookup) {
  switch (v.kind_case()) {
  case plan::Value::kIntValue:
    return v.int_value();
  case plan::Value::kFloatValue:
    return v.float_value();
  case plan::Value::kBoolValue:
    return v.bool_value();
  case plan::Value::kStringValue:
    return v.string_value();
  case plan::Value::kIntList:
    return c10::List<int64_t>(std::vector<int64_t>(
        v.int_list().values().begin(), v.int_list().values().end()));
  case plan::Value::kFloatList:
    return c10::List<double>(std::vector<double>(
        v.float_list().values().begin(), v.float_list().values().end()));
  case plan::Value::kBoolList: {
    c10::List<bool> l;
    for (bool b : v.bool_list().values())
      l.push_back(b);
    return l;
  }
  case plan::Value::kDtype:
  case plan::Value::kLayout:
  case plan::Value::kMemoryFormat:
    return intOf(v);
  case plan::Value::kDevice:
    return mapDevice(c10::Device(v.device().spec()));
  case plan::Value::kScalar:
    return scalarOf(v);
  case plan::Value::kRef:
  case plan::Value::kTensor:
    return tensorOf(v, lookup);
  case plan::Value::kRefList: {
    c10::List<at::Tensor> l;
    for (int64_t r : v.ref_list().refs())
      l.push_back(lookup(r));
    return l;
  }
  case plan::Value::kList: {
    c10::impl::GenericList l(c10::AnyType::get());
    for (const auto &e : v.list().values())
      l.push_back(toIValue(e, lookup));
    return l;
  }
  case plan::Value::kOptional:
    return v.optional().has_value() ? toIValue(v.optional().value(), lookup)
                                    : c10::IValue();
  case plan::Value::kNone:
  case plan::Value::KIND_NOT_SET:
    return c10::IValue();
  }
  return c10::IValue();
}

} // namespace monarch::tensor::detail
