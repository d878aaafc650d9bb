//===- ChannelAddr.h - Addresses of the three transports --------*- C++ -*-===//
//
// `inproc://N` (a queue inside this process), `unix:PATH` (a Unix-domain
// socket) and `tcp://HOST:PORT`. One parser and printer so addresses round-trip
// through bootstrap messages and logs.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_TRANSPORT_CHANNELADDR_H
#define MONARCH_RUNTIME_TRANSPORT_CHANNELADDR_H

#include "monarch/runtime/util/Status.h"

#include <cstdint>
#include <string>

namespace monarch::transport {

enum class TransportKind { Inproc, Unix, Tcp };

struct ChannelAddr {
  TransportKind kind = TransportKind::Inproc;
  std::string host;  ///< tcp host; unix socket path
  uint16_t port = 0; ///< tcp port
  uint64_t id = 0;   ///< inproc queue id

  static Expected<ChannelAddr> parse(const std::string &text);
  static ChannelAddr inproc(uint64_t id);
  static ChannelAddr unixSocket(std::string path);
  static ChannelAddr tcp(std::string host, uint16_t port);
  std::string toString() const;

  bool operator==(const ChannelAddr &o) const {
    return kind == o.kind && host == o.host && port == o.port && id == o.id;
  }
};

} // namespace monarch::transport

#endif // MONARCH_RUNTIME_TRANSPORT_CHANNELADDR_H
