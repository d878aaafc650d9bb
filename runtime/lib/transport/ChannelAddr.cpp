#include "monarch/runtime/transport/ChannelAddr.h"

#include <cerrno>
#include <cstdlib>

namespace monarch::transport {

static bool parseUnsigned(const std::string &s, uint64_t max, uint64_t &out) {
  if (s.empty() || s.size() > 20)
    return false;
  for (char c : s)
    if (c < '0' || c > '9')
      return false;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
  if (errno != 0 || v > max)
    return false;
  out = v;
  return true;
}

Expected<ChannelAddr> ChannelAddr::parse(const std::string &text) {
  auto bad = [&](const char *why) {
    return Status(ErrorCode::Invalid,
                  "bad channel address '" + text + "': " + why);
  };
  if (text.rfind("inproc://", 0) == 0) {
    uint64_t id;
    if (!parseUnsigned(text.substr(9), UINT64_MAX, id))
      return bad("expected inproc://N");
    return inproc(id);
  }
  if (text.rfind("unix:", 0) == 0) {
    std::string path = text.substr(5);
    // sockaddr_un holds 108 bytes including the terminator.
    if (path.empty() || path.size() > 107)
      return bad("unix path empty or longer than 107 bytes");
    return unixSocket(path);
  }
  if (text.rfind("tcp://", 0) == 0) {
    std::string rest = text.substr(6);
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return bad("expected tcp://HOST:PORT");
    std::string host = rest.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    uint64_t port;
    if (!parseUnsigned(rest.substr(colon + 1), 65535, port))
      return bad("port must be 0..65535");
    return tcp(host, static_cast<uint16_t>(port));
  }
  return bad("unknown scheme (inproc://, unix:, tcp://)");
}

ChannelAddr ChannelAddr::inproc(uint64_t id) {
  ChannelAddr a;
  a.kind = TransportKind::Inproc;
  a.id = id;
  return a;
}

ChannelAddr ChannelAddr::unixSocket(std::string path) {
  ChannelAddr a;
  a.kind = TransportKind::Unix;
  a.host = std::move(path);
  return a;
}

ChannelAddr ChannelAddr::tcp(std::string host, uint16_t port) {
  ChannelAddr a;
  a.kind = TransportKind::Tcp;
  a.host = std::move(host);
  a.port = port;
  return a;
}

std::string ChannelAddr::toString() const {
  switch (kind) {
  case TransportKind::Inproc:
    return "inproc://" + std::to_string(id);
  case TransportKind::Unix:
    return "unix:" + host;
  case TransportKind::Tcp:
    if (host.find(':') != std::string::npos)
      return "tcp://[" + host + "]:" + std::to_string(port);
    return "tcp://" + host + ":" + std::to_string(port);
  }
  return "?";
}

} // namespace monarch::transport
