#pragma once

// `trainctl version`: what this build of the CLI is and what it was compiled
// against, then (unless --client) what the coordinator it talks to is. The
// CLI's part needs no coordinator: an unreachable one is said so, exit 0.

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

// The text `trainctl version` prints: the project version, then one line per
// library it links (gRPC, Protobuf), and a line saying that LibTorch, CUDA
// and NCCL are not linked (only trainctl-worker trains).
std::string VersionText();

// Adds the `version` subcommand to `app` (its --client flag goes to
// `client_only`); the caller runs PrintVersion when it was parsed.
CLI::App* AddVersionCommand(CLI::App& app, bool* client_only);

// Writes VersionText() to `out`, or with json one object
// {"trainctl":..., "grpc":..., "protobuf":...}; returns exit code 0.
int PrintVersion(std::ostream& out, bool json = false);

// The coordinator's part: one line "coordinator ADDRESS: trainctl V (gRPC
// G, Protobuf P), up 2h 5m, 2 workers; your token is alice's (user)", or
// "coordinator ADDRESS: cannot ask it: REASON" when `info` is an error. With
// json, the whole answer as one object {"trainctl":..., "coordinator":
// {...}} instead of PrintVersion's.
void PrintServerVersion(std::ostream& out, bool json, const std::string& address,
                        const absl::StatusOr<v1::ServerInfo>& info,
                        int64_t now_unix_ms);

}  // namespace trainctl::client
