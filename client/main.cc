// trainctl: command-line client of trainctl-coordinator.

#include <grpc/support/log.h>

#include <cstdlib>
#include <iostream>

#include "client/commands.h"

namespace {

// gRPC's own log lines ("E1201 ... ssl_transport_security.cc ... Handshake
// failed") are for its developers; the CLI says what failed in its own
// words. GRPC_VERBOSITY set by the user keeps them.
void DropGrpcLog(gpr_log_func_args*) {}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("GRPC_VERBOSITY") == nullptr) gpr_set_log_function(DropGrpcLog);
  return trainctl::client::RunCli(argc, argv, std::cout, std::cerr);
}
