#pragma once

#include <cstdint>
#include <string>

namespace trainctl::coordinator {

// What the coordinator says of itself: GetServerInfo (trainctl version) and
// /metrics' trainctl_build_info.
struct ServerBuild {
  std::string version = "unknown", grpc_version = "unknown",
              protobuf_version = "unknown";
  int64_t started_unix_ms = 0;
};

}  // namespace trainctl::coordinator
