#include "client/version_command.h"

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

CLI::App* AddVersionCommand(CLI::App& app) {
  CLI::App* version = app.add_subcommand(
      "version", "Print the version and the libraries this build uses");
  version->footer(
      "\nExamples:\n  trainctl version\n  trainctl version --output json");
  return version;
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
