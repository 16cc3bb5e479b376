#pragma once

// Defaults for trainctl's global options from a config file and the
// environment. Precedence, highest first: command-line flag, TRAINCTL_*
// environment variable, config file, built-in default (docs/cli.md).

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace trainctl::client {

// What ~/.config/trainctl/config.yaml may set; unset keys stay nullopt.
struct ConfigFile {
  std::optional<std::string> coordinator;
  std::optional<std::string> output;  // "table" or "json"
  std::optional<std::string> token;   // written by `trainctl login`
  std::optional<std::string> ca_cert;  // path of the cluster CA certificate
  std::optional<bool> insecure;       // plaintext, no token
};

// $XDG_CONFIG_HOME/trainctl/config.yaml when XDG_CONFIG_HOME is set and
// absolute (the XDG spec says to ignore relative values), else
// $HOME/.config/trainctl/config.yaml; "" when neither is usable.
std::string ConfigFilePath(const char* xdg_config_home, const char* home);

// Parses config file text. Errors name `path` and the offending key.
absl::StatusOr<ConfigFile> ParseConfigFile(const std::string& text,
                                           const std::string& path);
// Reads and parses `path`; a missing file is an empty config, not an error.
absl::StatusOr<ConfigFile> LoadConfigFile(const std::string& path);

// The effective global options.
struct Settings {
  std::string coordinator;
  std::string output;
  std::string token;
  std::string ca_cert;
  bool insecure = false;
};

// The security flags as given (empty / false: not given).
struct SecurityFlags {
  std::string token;
  std::string ca_cert;
  bool insecure = false;
};

// Applies the precedence rule. flag_* are empty when the flag was not
// given; env holds the TRAINCTL_* variables (missing or empty = unset).
// An invalid TRAINCTL_OUTPUT or TRAINCTL_INSECURE is an error naming the
// variable. The coordinator address gets port 7070 when it names none
// (CoordinatorAddress).
absl::StatusOr<Settings> ResolveSettings(
    const std::string& flag_coordinator, const std::string& flag_output,
    const std::map<std::string, std::string>& env, const ConfigFile& file,
    const SecurityFlags& flags = {});

// `address` as a gRPC target: HOST:PORT as given, HOST or [IPv6] with the
// coordinator's default port 7070 added, "unix:" and "scheme://" targets
// untouched. INVALID_ARGUMENT naming `source` (the flag, variable or config
// key it came from) for an empty or non-numeric port, or an IPv6 address
// without brackets.
absl::StatusOr<std::string> CoordinatorAddress(const std::string& address,
                                               const std::string& source);

// Sets `key` to `value` in the config file at `path` (created 0600 with its
// directory; an existing file's other keys are kept and it is made 0600,
// since it holds a token).
absl::Status SetConfigValues(const std::string& path,
                             const std::map<std::string, std::string>& values);

}  // namespace trainctl::client
