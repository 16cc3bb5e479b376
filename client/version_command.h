#pragma once

// `trainctl version`: what this build of the CLI is and what it was compiled
// against. Needs no coordinator.

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace trainctl::client {

// The text `trainctl version` prints: the project version, then one line per
// library it links (gRPC, Protobuf), and a line saying that LibTorch, CUDA
// and NCCL are not linked (only trainctl-worker trains).
std::string VersionText();

// Adds the `version` subcommand to `app`; the caller runs PrintVersion when
// the returned subcommand was parsed.
CLI::App* AddVersionCommand(CLI::App& app);

// Writes VersionText() to `out`, or with json one object
// {"trainctl":..., "grpc":..., "protobuf":...}; returns exit code 0.
int PrintVersion(std::ostream& out, bool json = false);

}  // namespace trainctl::client
