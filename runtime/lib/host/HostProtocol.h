//===- HostProtocol.h - host.proto messages on runtime connections -*- C++
//-*-===//
//
// host.proto messages ride as the bytes of a PortMessage value, so agents and
// controllers use the runtime's authenticated links and routers unchanged.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_LIB_HOST_HOSTPROTOCOL_H
#define MONARCH_RUNTIME_LIB_HOST_HOSTPROTOCOL_H

#include "host.pb.h"
#include "monarch/runtime/transport/Message.h"

namespace monarch::host {

template <typename M>
transport::Message wrapHostMessage(const M &body, uint64_t destPort) {
  transport::Message m;
  m.envelope.set_dest_port(destPort);
  body.SerializeToString(m.envelope.mutable_port_message()
                             ->mutable_value()
                             ->mutable_bytes_value());
  return m;
}

/// False when `m` does not carry a well-formed `M`.
template <typename M>
bool unwrapHostMessage(const transport::Message &m, M &body) {
  if (!m.envelope.has_port_message() ||
      m.envelope.port_message().value().kind_case() !=
          proto::Value::kBytesValue)
    return false;
  return body.ParseFromString(m.envelope.port_message().value().bytes_value());
}

} // namespace monarch::host

#endif // MONARCH_RUNTIME_LIB_HOST_HOSTPROTOCOL_H
