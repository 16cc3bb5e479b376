#pragma once

// Internal to the command files: what every command needs besides its own
// arguments.

#include <ostream>

#include "absl/status/status.h"
#include "client/coordinator_client.h"
#include "client/format.h"
#include "client/render.h"

namespace trainctl::client {

struct Env {
  CoordinatorClient* client;
  std::ostream& out;
  std::ostream& err;
  bool json;
  RenderContext ctx;
  // stdout is a terminal (and TERM is not "dumb"): `watch` redraws a live
  // view in place instead of printing plain lines.
  bool terminal = false;
};

// Prints the failed RPC's message on err; returns its exit code.
inline int Fail(const Env& env, const absl::Status& status) {
  env.err << "trainctl: " << DescribeError(status, env.client->address())
          << "\n";
  return ExitCodeForStatus(status);
}

}  // namespace trainctl::client
