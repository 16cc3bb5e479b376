#include "worker/agent/collective_host.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace trainctl::agent {
namespace {

std::string StripBrackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

// "HOST:PORT" or "[V6]:PORT" into its parts; the error names the value.
absl::Status SplitCoordinator(const std::string& address, std::string* host,
                              std::string* port) {
  const size_t colon = address.rfind(':');
  int number = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &number) || number < 1 ||
      number > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--coordinator ", address, ": expected HOST:PORT, e.g. head:7070"));
  }
  *host = StripBrackets(address.substr(0, colon));
  *port = std::to_string(number);
  return absl::OkStatus();
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  const std::string h = StripBrackets(host);
  return h == "localhost" || absl::StartsWith(h, "127.") || h == "::1";
}

std::string CollectiveHostWarning(const std::string& collective_host,
                                  const std::string& coordinator) {
  const bool local_coordinator =
      absl::StartsWith(coordinator, "unix:") ||
      IsLoopbackHost(coordinator.substr(0, coordinator.rfind(':')));
  if (local_coordinator || !IsLoopbackHost(collective_host)) return "";
  return absl::StrCat("collective host ", collective_host,
                      " is a loopback address: ranks on other nodes cannot "
                      "reach this node's ranks (set --collective-host)");
}

absl::StatusOr<std::string> DefaultCollectiveHost(
    const std::string& coordinator) {
  if (absl::StartsWith(coordinator, "unix:")) return std::string("127.0.0.1");
  std::string host, port;
  RETURN_IF_ERROR(SplitCoordinator(coordinator, &host, &port));
  if (IsLoopbackHost(host)) return std::string("127.0.0.1");

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve the coordinator address ", coordinator,
                     ": ", gai_strerror(rc)));
  }
  // connect() on a UDP socket only asks the routing table for the source
  // address; no packet leaves.
  std::string local, last_error = "no address";
  for (addrinfo* a = found; a != nullptr && local.empty(); a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = strerror(errno);
      continue;
    }
    sockaddr_storage self{};
    socklen_t self_len = sizeof(self);
    char text[NI_MAXHOST] = {};
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) != 0) {
      last_error = strerror(errno);
    } else if (int rc =
                   getnameinfo(reinterpret_cast<sockaddr*>(&self), self_len,
                               text, sizeof(text), nullptr, 0, NI_NUMERICHOST);
               rc != 0) {
      last_error = gai_strerror(rc);
    } else {
      local = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (local.empty()) {
    return absl::UnavailableError(
        absl::StrCat("no route from this node to the coordinator at ",
                     coordinator, ": ", last_error));
  }
  return local;
}

}  // namespace trainctl::agent
