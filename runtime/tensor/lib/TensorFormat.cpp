#include "monarch/tensor/TensorFormat.h"

#include "monarch/tensor/Collectives.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

namespace monarch::tensor {
namespace {

float halfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float value;
  if (exp == 0)
    value = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    value = mant ? NAN : INFINITY;
  else
    value = std::ldexp(static_cast<float>(mant | 0x400), int(exp) - 25);
  return sign ? -value : value;
}

float bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

template <typename T> T load(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string element(plan::DType dtype, const char *p) {
  switch (dtype) {
  case plan::UINT8:
    return std::to_string(load<uint8_t>(p));
  case plan::INT8:
    return std::to_string(load<int8_t>(p));
  case plan::INT16:
    return std::to_string(load<int16_t>(p));
  case plan::INT32:
    return std::to_string(load<int32_t>(p));
  case plan::INT64:
    return std::to_string(load<int64_t>(p));
  case plan::FLOAT16:
    return number(halfToFloat(load<uint16_t>(p)));
  case plan::BFLOAT16:
    return number(bf16ToFloat(load<uint16_t>(p)));
  case plan::FLOAT32:
    return number(load<float>(p));
  case plan::FLOAT64:
    return number(load<double>(p));
  case plan::BOOL:
    return load<uint8_t>(p) ? "true" : "false";
  case plan::COMPLEX64:
    return "(" + number(load<float>(p)) + "+" + number(load<float>(p + 4)) +
           "j)";
  case plan::COMPLEX128:
    return "(" + number(load<double>(p)) + "+" + number(load<double>(p + 8)) +
           "j)";
  default:
    return "?";
  }
}

} // namespace

const char *dtypeName(plan::DType dtype) {
  switch (dtype) {
  case plan::UINT8:
    return "ui8";
  case plan::INT8:
    return "i8";
  case plan::INT16:
    return "i16";
  case plan::INT32:
    return "i32";
  case plan::INT64:
    return "i64";
  case plan::FLOAT16:
    return "f16";
  case plan::FLOAT32:
    return "f32";
  case plan::FLOAT64:
    return "f64";
  case plan::BOOL:
    return "i1";
  case plan::BFLOAT16:
    return "bf16";
  case plan::COMPLEX64:
    return "complex<f32>";
  case plan::COMPLEX128:
    return "complex<f64>";
  default:
    return "unknown";
  }
}

std::string formatTensor(const plan::TensorData &tensor, size_t maxElements) {
  std::string out = "tensor<";
  size_t count = 1;
  for (int64_t d : tensor.shape()) {
    out += std::to_string(d) + "x";
    count *= static_cast<size_t>(std::max<int64_t>(d, 0));
  }
  out += dtypeName(tensor.dtype());
  out += "> ";
  size_t width = elementSize(tensor.dtype());
  if (width == 0 || tensor.data().size() != count * width)
    return out + "<" + std::to_string(tensor.data().size()) +
           " bytes do not match the shape>";
  const char *data = tensor.data().data();
  if (tensor.shape_size() == 0)
    return out + element(tensor.dtype(), data);

  // Recursive nested lists; past the budget, rows are cut with "...".
  size_t budget = maxElements;
  std::function<void(int, size_t)> emit = [&](int dim, size_t offset) {
    size_t stride = 1;
    for (int d = dim + 1; d < tensor.shape_size(); ++d)
      stride *= tensor.shape(d);
    out += "[";
    for (int64_t i = 0; i < tensor.shape(dim); ++i) {
      if (i)
        out += ", ";
      if (budget == 0) {
        out += "...";
        break;
      }
      if (dim + 1 == tensor.shape_size()) {
        out += element(tensor.dtype(), data + (offset + i) * width);
        --budget;
      } else {
        emit(dim + 1, offset + i * stride);
      }
    }
    out += "]";
  };
  emit(0, 0);
  return out;
}

} // namespace monarch::tensor
