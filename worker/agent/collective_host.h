#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace trainctl::agent {

// The address this node's ranks advertise for collectives when the operator
// did not give --collective-host: the local address the kernel picks to
// reach `coordinator` ("HOST:PORT", "[V6]:PORT" or "unix:PATH"). That is an
// address of the interface other nodes reach this one through, also where
// the hostname resolves to loopback (Debian's 127.0.1.1) or to an address
// of another network namespace. A loopback or unix: coordinator gives
// 127.0.0.1. Found with a UDP socket connected to the coordinator, which
// sends nothing. Errors (InvalidArgument for a malformed address,
// Unavailable when it does not resolve or has no route) name the address.
// Thread-safe; may block on name resolution.
absl::StatusOr<std::string> DefaultCollectiveHost(
    const std::string& coordinator);

// Whether `host` is a loopback name or address ("localhost", 127.x.y.z,
// ::1, bracketed or not), without resolving it.
bool IsLoopbackHost(const std::string& host);

// What is wrong with advertising `collective_host` while the coordinator is
// at `coordinator`: a loopback address is unreachable from other nodes
// unless the coordinator, and so the whole cluster, is on this machine.
// Empty when nothing is.
std::string CollectiveHostWarning(const std::string& collective_host,
                                  const std::string& coordinator);

}  // namespace trainctl::agent
