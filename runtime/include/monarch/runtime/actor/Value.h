//===- Value.h - C++ values <-> protobuf Value ------------------*- C++ -*-===//
//
// Endpoint arguments and results are encoded through ValueCodec<T>, which is
// specialized for scalars, strings, containers, Blob (raw bytes carried as a
// payload frame, never copied into the protobuf) and any protobuf message.
// Decoding a value of the wrong kind throws DecodeError; the runtime catches
// it where the handler runs and turns it into an error reply, so it never
// crosses a thread.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_ACTOR_VALUE_H
#define MONARCH_RUNTIME_ACTOR_VALUE_H

#include "monarch/runtime/transport/Message.h"

#include <google/protobuf/message_lite.h>

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace monarch {

using transport::Buffer;

/// Bytes sent as their own frame beside the envelope (tensor storage later).
struct Blob {
  Buffer buffer;
};

/// Raw frames that travel with an encoded value.
using PayloadList = std::vector<Buffer>;

class DecodeError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

template <typename T, typename Enable = void> struct ValueCodec;

template <typename T>
void encodeValue(const T &value, proto::Value &out, PayloadList &payloads) {
  ValueCodec<T>::encode(value, out, payloads);
}
template <typename T>
T decodeValue(const proto::Value &in, const PayloadList &payloads) {
  return ValueCodec<T>::decode(in, payloads);
}

const char *valueKindName(const proto::Value &value);
[[noreturn]] void throwKindMismatch(const char *expected,
                                    const proto::Value &got);
/// Adds `offset` to every payload index inside `value` (merging replies).
void rebasePayloads(proto::Value &value, uint32_t offset);

template <> struct ValueCodec<bool> {
  static void encode(bool v, proto::Value &out, PayloadList &) {
    out.set_bool_value(v);
  }
  static bool decode(const proto::Value &in, const PayloadList &) {
    if (in.kind_case() != proto::Value::kBoolValue)
      throwKindMismatch("bool", in);
    return in.bool_value();
  }
};

template <typename T>
struct ValueCodec<
    T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static void encode(T v, proto::Value &out, PayloadList &) {
    out.set_int_value(static_cast<int64_t>(v));
  }
  static T decode(const proto::Value &in, const PayloadList &) {
    if (in.kind_case() != proto::Value::kIntValue)
      throwKindMismatch("int", in);
    int64_t v = in.int_value();
    if (static_cast<int64_t>(static_cast<T>(v)) != v)
      throw DecodeError("integer " + std::to_string(v) + " out of range");
    return static_cast<T>(v);
  }
};

template <typename T>
struct ValueCodec<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static void encode(T v, proto::Value &out, PayloadList &) {
    out.set_double_value(static_cast<double>(v));
  }
  static T decode(const proto::Value &in, const PayloadList &) {
    if (in.kind_case() == proto::Value::kIntValue)
      return static_cast<T>(in.int_value());
    if (in.kind_case() != proto::Value::kDoubleValue)
      throwKindMismatch("double", in);
    return static_cast<T>(in.double_value());
  }
};

template <> struct ValueCodec<std::string> {
  static void encode(const std::string &v, proto::Value &out, PayloadList &) {
    out.set_string_value(v);
  }
  static std::string decode(const proto::Value &in, const PayloadList &) {
    if (in.kind_case() == proto::Value::kBytesValue)
      return in.bytes_value();
    if (in.kind_case() != proto::Value::kStringValue)
      throwKindMismatch("string", in);
    return in.string_value();
  }
};

template <> struct ValueCodec<Blob> {
  static void encode(const Blob &v, proto::Value &out, PayloadList &payloads) {
    out.set_payload(static_cast<uint32_t>(payloads.size()));
    payloads.push_back(v.buffer);
  }
  static Blob decode(const proto::Value &in, const PayloadList &payloads) {
    if (in.kind_case() != proto::Value::kPayload)
      throwKindMismatch("blob", in);
    if (in.payload() >= payloads.size())
      throw DecodeError("payload index out of range");
    return Blob{payloads[in.payload()]};
  }
};

template <> struct ValueCodec<proto::Value> {
  static void encode(const proto::Value &v, proto::Value &out, PayloadList &) {
    out = v;
  }
  static proto::Value decode(const proto::Value &in, const PayloadList &) {
    return in;
  }
};

template <typename T> struct ValueCodec<std::vector<T>> {
  static void encode(const std::vector<T> &v, proto::Value &out,
                     PayloadList &payloads) {
    auto *list = out.mutable_list();
    for (const auto &item : v)
      ValueCodec<T>::encode(item, *list->add_items(), payloads);
  }
  static std::vector<T> decode(const proto::Value &in,
                               const PayloadList &payloads) {
    if (in.kind_case() != proto::Value::kList)
      throwKindMismatch("list", in);
    std::vector<T> out;
    out.reserve(in.list().items_size());
    for (const auto &item : in.list().items())
      out.push_back(ValueCodec<T>::decode(item, payloads));
    return out;
  }
};

template <typename T> struct ValueCodec<std::map<std::string, T>> {
  static void encode(const std::map<std::string, T> &v, proto::Value &out,
                     PayloadList &payloads) {
    auto *map = out.mutable_map()->mutable_entries();
    for (const auto &[key, item] : v)
      ValueCodec<T>::encode(item, (*map)[key], payloads);
  }
  static std::map<std::string, T> decode(const proto::Value &in,
                                         const PayloadList &payloads) {
    if (in.kind_case() != proto::Value::kMap)
      throwKindMismatch("map", in);
    std::map<std::string, T> out;
    for (const auto &[key, item] : in.map().entries())
      out.emplace(key, ValueCodec<T>::decode(item, payloads));
    return out;
  }
};

template <typename T> struct ValueCodec<std::optional<T>> {
  static void encode(const std::optional<T> &v, proto::Value &out,
                     PayloadList &payloads) {
    if (v)
      ValueCodec<T>::encode(*v, out, payloads);
    else
      out.set_null(true);
  }
  static std::optional<T> decode(const proto::Value &in,
                                 const PayloadList &payloads) {
    if (in.kind_case() == proto::Value::kNull ||
        in.kind_case() == proto::Value::KIND_NOT_SET)
      return std::nullopt;
    return ValueCodec<T>::decode(in, payloads);
  }
};

/// Any protobuf message travels as its serialized bytes.
template <typename T>
struct ValueCodec<
    T, std::enable_if_t<std::is_base_of_v<google::protobuf::MessageLite, T> &&
                        !std::is_same_v<T, proto::Value>>> {
  static void encode(const T &v, proto::Value &out, PayloadList &) {
    out.set_bytes_value(v.SerializeAsString());
  }
  static T decode(const proto::Value &in, const PayloadList &) {
    if (in.kind_case() != proto::Value::kBytesValue)
      throwKindMismatch("protobuf bytes", in);
    T out;
    if (!out.ParseFromString(in.bytes_value()))
      throw DecodeError("bytes do not parse as " + out.GetTypeName());
    return out;
  }
};

/// The "no value" result of a void endpoint.
struct Unit {};
template <> struct ValueCodec<Unit> {
  static void encode(const Unit &, proto::Value &out, PayloadList &) {
    out.set_null(true);
  }
  static Unit decode(const proto::Value &, const PayloadList &) { return {}; }
};

/// Endpoint arguments: a list, one item per parameter.
template <typename... Args>
proto::Value encodeArgs(PayloadList &payloads, const Args &...args) {
  proto::Value out;
  auto *list = out.mutable_list();
  (ValueCodec<std::decay_t<Args>>::encode(args, *list->add_items(), payloads),
   ...);
  return out;
}

template <typename... Args, size_t... I>
std::tuple<std::decay_t<Args>...> decodeArgsImpl(const proto::Value &in,
                                                 const PayloadList &payloads,
                                                 std::index_sequence<I...>) {
  return std::tuple<std::decay_t<Args>...>(
      ValueCodec<std::decay_t<Args>>::decode(in.list().items(I), payloads)...);
}

template <typename... Args>
std::tuple<std::decay_t<Args>...> decodeArgs(const proto::Value &in,
                                             const PayloadList &payloads) {
  if (in.kind_case() != proto::Value::kList)
    throwKindMismatch("argument list", in);
  if (in.list().items_size() != static_cast<int>(sizeof...(Args)))
    throw DecodeError("expected " + std::to_string(sizeof...(Args)) +
                      " arguments, got " +
                      std::to_string(in.list().items_size()));
  return decodeArgsImpl<Args...>(in, payloads,
                                 std::index_sequence_for<Args...>{});
}

} // namespace monarch

#endif // MONARCH_RUNTIME_ACTOR_VALUE_H
