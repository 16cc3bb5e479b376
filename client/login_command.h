#pragma once

// `trainctl login` and how every command's connection is secured: the
// cluster CA to verify the coordinator with and the user's bearer token,
// from flags, TRAINCTL_* variables or the config file (client/config.h).

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "client/config.h"
#include "client/coordinator_client.h"

namespace trainctl::client {

// The coordinator's files on this machine, when it runs here with the
// default state directory: its CA certificate and its admin token. Used
// only when nothing else names a CA or token, so the person who started a
// local coordinator needs no setup.
struct LocalCoordinatorFiles {
  std::string ca_cert;
  std::string admin_token;
};
LocalCoordinatorFiles DefaultLocalCoordinatorFiles();

// The connection security for `settings`. Errors name the file at fault.
absl::StatusOr<ClientSecurity> ResolveSecurity(
    const Settings& settings, const LocalCoordinatorFiles& local);

CLI::App* AddLoginCommand(CLI::App& app);

// Checks the token against the coordinator (one authenticated call), then
// saves coordinator, token and CA path in the config file at `config_path`
// with mode 0600. A token can also come on stdin (`-`), kept out of shell
// history.
int CmdLogin(const Settings& settings, const std::string& config_path,
             std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace trainctl::client
