// The worker's default collective host: the local address toward the
// coordinator. Asks the routing table only (a connected UDP socket sends
// nothing). tests/deploy/netns_test.sh checks it across network namespaces.

#include "worker/agent/collective_host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>

#include <set>
#include <string>

namespace trainctl::agent {
namespace {

using ::testing::HasSubstr;

// The numeric addresses of this machine's interfaces.
std::set<std::string> InterfaceAddresses() {
  std::set<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[NI_MAXHOST] = {};
    const socklen_t len =
        family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (getnameinfo(i->ifa_addr, len, text, sizeof(text), nullptr, 0,
                    NI_NUMERICHOST) == 0) {
      out.insert(text);
    }
  }
  freeifaddrs(list);
  return out;
}

TEST(CollectiveHostTest, LoopbackOrUnixCoordinatorGivesLoopback) {
  for (const char* coordinator :
       {"127.0.0.1:7070", "localhost:7070", "[::1]:7070", "127.0.1.1:1",
        "unix:/run/trainctl.sock"}) {
    absl::StatusOr<std::string> host = DefaultCollectiveHost(coordinator);
    ASSERT_TRUE(host.ok()) << coordinator << ": " << host.status();
    EXPECT_EQ(*host, "127.0.0.1") << coordinator;
  }
}

TEST(CollectiveHostTest, RemoteCoordinatorGivesTheAddressOfTheRouteToIt) {
  // 192.0.2.1 (TEST-NET-1) is routed, if at all, through a real interface:
  // the answer is that interface's address, or, without a route, an error
  // that names the coordinator.
  absl::StatusOr<std::string> host = DefaultCollectiveHost("192.0.2.1:7070");
  if (!host.ok()) {
    EXPECT_EQ(host.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(host.status().message(),
                HasSubstr("no route from this node to the coordinator at "
                          "192.0.2.1:7070"));
    return;
  }
  EXPECT_FALSE(IsLoopbackHost(*host)) << *host;
  EXPECT_EQ(InterfaceAddresses().count(*host), 1u)
      << *host << " is not an address of this machine";
}

TEST(CollectiveHostTest, MalformedCoordinatorIsNamed) {
  for (const char* coordinator :
       {"head", "head:", "head:http", "head:70000", ":7070", "head:0"}) {
    absl::StatusOr<std::string> host = DefaultCollectiveHost(coordinator);
    ASSERT_FALSE(host.ok()) << coordinator;
    EXPECT_EQ(host.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(host.status().message(),
                HasSubstr(std::string("--coordinator ") + coordinator +
                          ": expected HOST:PORT"));
  }
}

TEST(CollectiveHostTest, LoopbackHosts) {
  for (const char* host :
       {"localhost", "127.0.0.1", "127.0.1.1", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host :
       {"10.231.0.11", "node-a", "fd00::1", "1270.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(CollectiveHostTest, WarnsOnlyForLoopbackWithARemoteCoordinator) {
  EXPECT_THAT(CollectiveHostWarning("127.0.1.1", "head:7070"),
              HasSubstr("collective host 127.0.1.1 is a loopback address"));
  EXPECT_THAT(CollectiveHostWarning("localhost", "10.0.0.1:7070"),
              HasSubstr("cannot reach this node's ranks"));
  EXPECT_EQ(CollectiveHostWarning("127.0.0.1", "127.0.0.1:7070"), "");
  EXPECT_EQ(CollectiveHostWarning("127.0.0.1", "[::1]:7070"), "");
  EXPECT_EQ(CollectiveHostWarning("127.0.0.1", "unix:/run/t.sock"), "");
  EXPECT_EQ(CollectiveHostWarning("10.231.0.11", "10.231.0.1:7070"), "");
}

}  // namespace
}  // namespace trainctl::agent
