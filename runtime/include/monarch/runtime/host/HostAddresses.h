//===- HostAddresses.h - Where host agents and the controller listen -*- C++
//-*-===//
//
// Host agents are named by `HOST:PORT` (or `tcp://HOST:PORT`); HOST may be a
// name, which is resolved once, because listeners bind numeric addresses.
// The controller must listen on an address the agents' hosts can reach:
// `localAddressToward` finds the local interface address that routes to a
// given peer (what the kernel would pick), never loopback unless the peer is.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_HOST_HOSTADDRESSES_H
#define MONARCH_RUNTIME_HOST_HOSTADDRESSES_H

#include "monarch/runtime/util/Status.h"

#include <string>
#include <vector>

namespace monarch::host {

/// "node1:7000" or "tcp://10.0.0.2:7000" -> "tcp://10.0.0.2:7000" (resolved).
Expected<std::string> agentAddress(const std::string &text);

/// "a:1,b:2" -> resolved addresses, in order; an empty item is an error.
Expected<std::vector<std::string>> parseHostList(const std::string &text);

/// One address per line; blank lines and `#` comments are skipped.
Expected<std::vector<std::string>> readHostsFile(const std::string &path);

/// The numeric IPv4/IPv6 address of `name`.
Expected<std::string> resolveHost(const std::string &name);

/// The local address the kernel would use to reach `peerIp`.
Expected<std::string> localAddressToward(const std::string &peerIp);

/// The host part of "tcp://HOST:PORT" ("" for other addresses).
std::string tcpHostOf(const std::string &addr);

} // namespace monarch::host

#endif // MONARCH_RUNTIME_HOST_HOSTADDRESSES_H
