//===- WireValues.h - Fields of the RDMA service's map values ---*- C++ -*-===//
//
// The RDMA messages are proto::Value maps (the runtime's generic value), so
// the runtime's schema needs no RDMA-specific messages. These helpers read
// fields with a clear error for a missing or mistyped one.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_LIB_WIREVALUES_H
#define MONARCH_RDMA_LIB_WIREVALUES_H

#include "runtime.pb.h"

#include "monarch/runtime/util/Status.h"

#include <string>

namespace monarch::rdma::wire {

inline void setInt(proto::ValueMap &m, const std::string &key, int64_t v) {
  (*m.mutable_entries())[key].set_int_value(v);
}
inline void setString(proto::ValueMap &m, const std::string &key,
                      std::string v) {
  (*m.mutable_entries())[key].set_string_value(std::move(v));
}
inline void setBytes(proto::ValueMap &m, const std::string &key,
                     std::string v) {
  (*m.mutable_entries())[key].set_bytes_value(std::move(v));
}

inline Expected<int64_t> getInt(const proto::ValueMap &m,
                                const std::string &key) {
  auto it = m.entries().find(key);
  if (it == m.entries().end() ||
      it->second.kind_case() != proto::Value::kIntValue)
    return Status(ErrorCode::Invalid,
                  "RDMA message without integer field '" + key + "'");
  return it->second.int_value();
}
inline Expected<std::string> getString(const proto::ValueMap &m,
                                       const std::string &key) {
  auto it = m.entries().find(key);
  if (it == m.entries().end())
    return Status(ErrorCode::Invalid,
                  "RDMA message without field '" + key + "'");
  if (it->second.kind_case() == proto::Value::kStringValue)
    return it->second.string_value();
  if (it->second.kind_case() == proto::Value::kBytesValue)
    return it->second.bytes_value();
  return Status(ErrorCode::Invalid,
                "RDMA message field '" + key + "' is not a string");
}

} // namespace monarch::rdma::wire

#endif // MONARCH_RDMA_LIB_WIREVALUES_H
