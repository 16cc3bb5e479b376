#include "client/version_command.h"

#include <algorithm>
#include <cstdint>

#include "client/json_text.h"

// The versions come from CMake (cmake/trainctl_build_info.cmake); a build
// without them says so instead of guessing.
#ifndef TRAINCTL_VERSION
#define TRAINCTL_VERSION "unknown"
#endif
#ifndef TRAINCTL_GRPC_VERSION
#define TRAINCTL_GRPC_VERSION "unknown"
#endif
#ifndef TRAINCTL_PROTOBUF_VERSION
#define TRAINCTL_PROTOBUF_VERSION "unknown"
#endif

namespace trainctl::client {

std::string VersionText() {
  return std::string("trainctl ") + TRAINCTL_VERSION +
         "\n"
         "  gRPC " TRAINCTL_GRPC_VERSION
         "\n"
         "  Protobuf " TRAINCTL_PROTOBUF_VERSION
         "\n"
         "  LibTorch, CUDA, NCCL: not linked (only trainctl-worker trains; "
         "see `trainctl-worker --version`)\n";
}

CLI::App* AddVersionCommand(CLI::App& app, bool* client_only) {
  CLI::App* version = app.add_subcommand(
      "version", "Print the version and the libraries this build uses, and "
                 "the coordinator's");
  version->add_flag("--client", *client_only,
                    "Only this CLI's version (ask no coordinator)");
  version->footer(
      "\nExamples:\n  trainctl version\n  trainctl version --client\n"
      "  trainctl version --output json");
  return version;
}

namespace {

std::string Uptime(int64_t ms) {
  const int64_t s = std::max<int64_t>(0, ms / 1000);
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) {
    return std::to_string(s / 3600) + "h " + std::to_string(s / 60 % 60) + "m";
  }
  return std::to_string(s / 86400) + "d " + std::to_string(s / 3600 % 24) + "h";
}

}  // namespace

void PrintServerVersion(std::ostream& out, bool json, const std::string& address,
                        const absl::StatusOr<v1::ServerInfo>& info,
                        int64_t now_unix_ms) {
  if (json) {
    out << "{\"trainctl\":" << JsonString(TRAINCTL_VERSION)
        << ",\"grpc\":" << JsonString(TRAINCTL_GRPC_VERSION)
        << ",\"protobuf\":" << JsonString(TRAINCTL_PROTOBUF_VERSION)
        << ",\"coordinator\":{\"address\":" << JsonString(address);
    if (info.ok()) {
      out << ",\"trainctl\":" << JsonString(info->version())
          << ",\"grpc\":" << JsonString(info->grpc_version())
          << ",\"protobuf\":" << JsonString(info->protobuf_version())
          << ",\"startedUnixMs\":" << info->started_unix_ms()
          << ",\"workers\":" << info->workers()
          << ",\"caller\":" << JsonString(info->caller())
          << ",\"callerRole\":" << JsonString(info->caller_role());
    } else {
      out << ",\"error\":" << JsonString(std::string(info.status().message()));
    }
    out << "}}\n";
    return;
  }
  out << "coordinator " << address << ": ";
  if (!info.ok()) {
    out << "cannot ask it: " << info.status().message() << "\n";
    return;
  }
  out << "trainctl " << info->version() << " (gRPC " << info->grpc_version()
      << ", Protobuf " << info->protobuf_version() << "), up "
      << Uptime(now_unix_ms - info->started_unix_ms()) << ", "
      << info->workers() << (info->workers() == 1 ? " worker" : " workers")
      << "; your token is " << info->caller() << "'s (" << info->caller_role()
      << ")";
  if (info->version() != TRAINCTL_VERSION) {
    out << "; this CLI is " << TRAINCTL_VERSION;
  }
  out << "\n";
}

int PrintVersion(std::ostream& out, bool json) {
  if (json) {
    out << "{\"trainctl\":" << JsonString(TRAINCTL_VERSION)
        << ",\"grpc\":" << JsonString(TRAINCTL_GRPC_VERSION)
        << ",\"protobuf\":" << JsonString(TRAINCTL_PROTOBUF_VERSION) << "}\n";
    return 0;
  }
  out << VersionText();
  return 0;
}

}  // namespace trainctl::client
