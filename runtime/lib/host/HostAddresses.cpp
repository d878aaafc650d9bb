#include "monarch/runtime/host/HostAddresses.h"

#include "monarch/runtime/transport/ChannelAddr.h"

#include <arpa/inet.h>
#include <cstring>
#include <fstream>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace monarch::host {

Expected<std::string> resolveHost(const std::string &name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found)
    return Status(ErrorCode::NotFound,
                  "cannot resolve host '" + name + "': " + ::gai_strerror(rc));
  char text[INET6_ADDRSTRLEN] = {0};
  const void *raw =
      found->ai_family == AF_INET
          ? static_cast<const void *>(
                &reinterpret_cast<sockaddr_in *>(found->ai_addr)->sin_addr)
          : static_cast<const void *>(
                &reinterpret_cast<sockaddr_in6 *>(found->ai_addr)->sin6_addr);
  ::inet_ntop(found->ai_family, raw, text, sizeof(text));
  ::freeaddrinfo(found);
  return std::string(text);
}

Expected<std::string> agentAddress(const std::string &text) {
  std::string rest = text;
  if (rest.rfind("tcp://", 0) == 0)
    rest = rest.substr(6);
  size_t colon = rest.rfind(':');
  if (rest.empty() || colon == std::string::npos || colon == 0 ||
      colon + 1 == rest.size())
    return Status(ErrorCode::Invalid,
                  "host agent address '" + text + "' is not HOST:PORT");
  std::string host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  std::string port = rest.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos ||
      port.size() > 5 || std::stoi(port) == 0 || std::stoi(port) > 65535)
    return Status(ErrorCode::Invalid,
                  "host agent address '" + text + "' has a bad port");
  auto ip = resolveHost(host);
  if (!ip.ok())
    return ip.status();
  auto addr = transport::ChannelAddr::tcp(*ip, std::stoi(port));
  return addr.toString();
}

Expected<std::vector<std::string>> parseHostList(const std::string &text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    auto addr = agentAddress(text.substr(start, comma - start));
    if (!addr.ok())
      return addr.status();
    out.push_back(*addr);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

Expected<std::vector<std::string>> readHostsFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return Status(ErrorCode::NotFound, "cannot read hosts file " + path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (size_t hash = line.find('#'); hash != std::string::npos)
      line.erase(hash);
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos)
      continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    auto addr = agentAddress(line);
    if (!addr.ok())
      return Status(ErrorCode::Invalid, path + ": " + addr.status().message());
    out.push_back(*addr);
  }
  if (out.empty())
    return Status(ErrorCode::Invalid, "hosts file " + path + " names no host");
  return out;
}

Expected<std::string> localAddressToward(const std::string &peerIp) {
  sockaddr_storage peer{};
  socklen_t len = 0;
  int family = AF_INET;
  auto *v4 = reinterpret_cast<sockaddr_in *>(&peer);
  auto *v6 = reinterpret_cast<sockaddr_in6 *>(&peer);
  if (::inet_pton(AF_INET, peerIp.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(9);
    len = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, peerIp.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(9);
    len = sizeof(sockaddr_in6);
  } else {
    return Status(ErrorCode::Invalid, "'" + peerIp + "' is not an IP address");
  }
  // Connecting a datagram socket sends nothing; it only picks the route.
  int fd = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return Status(ErrorCode::Internal,
                  std::string("socket: ") + std::strerror(errno));
  sockaddr_storage local{};
  socklen_t localLen = sizeof(local);
  bool ok =
      ::connect(fd, reinterpret_cast<sockaddr *>(&peer), len) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &localLen) == 0;
  int err = errno;
  ::close(fd);
  if (!ok)
    return Status(ErrorCode::NotFound,
                  "no route to " + peerIp + ": " + std::strerror(err));
  char text[INET6_ADDRSTRLEN] = {0};
  const void *raw =
      family == AF_INET
          ? static_cast<const void *>(
                &reinterpret_cast<sockaddr_in *>(&local)->sin_addr)
          : static_cast<const void *>(
                &reinterpret_cast<sockaddr_in6 *>(&local)->sin6_addr);
  ::inet_ntop(family, raw, text, sizeof(text));
  return std::string(text);
}

std::string tcpHostOf(const std::string &addr) {
  auto parsed = transport::ChannelAddr::parse(addr);
  if (!parsed.ok() || parsed->kind != transport::TransportKind::Tcp)
    return "";
  return parsed->host;
}

} // namespace monarch::host
