//===- RdmaHandle.cpp - Handle encoding ----------------------------------===//
#include "monarch/rdma/RdmaHandle.h"

#include "WireValues.h"

namespace monarch::rdma {

proto::Value RdmaHandle::toValue() const {
  proto::Value v;
  auto &m = *v.mutable_map();
  wire::setString(m, "owner", ownerAddr);
  wire::setInt(m, "port", static_cast<int64_t>(servicePort));
  wire::setInt(m, "id", static_cast<int64_t>(bufferId));
  wire::setInt(m, "size", static_cast<int64_t>(size));
  wire::setInt(m, "writable", writable ? 1 : 0);
  if (hasVerbs()) {
    wire::setString(m, "device", device);
    wire::setInt(m, "addr", static_cast<int64_t>(remoteAddr));
    wire::setInt(m, "rkey", rkey);
  }
  return v;
}

Expected<RdmaHandle> RdmaHandle::fromValue(const proto::Value &value) {
  if (value.kind_case() != proto::Value::kMap)
    return Status(ErrorCode::Invalid, "an RDMA handle is a map value");
  const auto &m = value.map();
  RdmaHandle h;
  auto owner = wire::getString(m, "owner");
  auto port = wire::getInt(m, "port");
  auto id = wire::getInt(m, "id");
  auto size = wire::getInt(m, "size");
  auto writable = wire::getInt(m, "writable");
  for (const Status *s : {&owner.status(), &port.status(), &id.status(),
                          &size.status(), &writable.status()})
    if (!s->isOk())
      return Status(ErrorCode::Invalid, "bad RDMA handle: " + s->message());
  if (*size < 0)
    return Status(ErrorCode::Invalid, "bad RDMA handle: negative size");
  h.ownerAddr = *owner;
  h.servicePort = static_cast<uint64_t>(*port);
  h.bufferId = static_cast<uint64_t>(*id);
  h.size = static_cast<uint64_t>(*size);
  h.writable = *writable != 0;
  if (m.entries().count("device")) {
    auto device = wire::getString(m, "device");
    auto addr = wire::getInt(m, "addr");
    auto rkey = wire::getInt(m, "rkey");
    if (!device.ok() || !addr.ok() || !rkey.ok())
      return Status(ErrorCode::Invalid, "bad RDMA handle: verbs fields");
    h.device = *device;
    h.remoteAddr = static_cast<uint64_t>(*addr);
    h.rkey = static_cast<uint32_t>(*rkey);
  }
  return h;
}

std::string RdmaHandle::toBytes() const {
  return toValue().SerializeAsString();
}

Expected<RdmaHandle> RdmaHandle::fromBytes(const std::string &bytes) {
  proto::Value v;
  if (!v.ParseFromString(bytes))
    return Status(ErrorCode::Invalid, "bad RDMA handle bytes");
  return fromValue(v);
}

std::string RdmaHandle::describe() const {
  return "RDMA buffer " + std::to_string(bufferId) + " (" +
         std::to_string(size) + " bytes) owned by " + ownerAddr;
}

} // namespace monarch::rdma
