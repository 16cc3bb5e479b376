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
};

// Applies the precedence rule. flag_* are empty when the flag was not
// given; env holds the TRAINCTL_* variables (missing or empty = unset).
// An invalid TRAINCTL_OUTPUT is an error naming the variable.
absl::StatusOr<Settings> ResolveSettings(
    const std::string& flag_coordinator, const std::string& flag_output,
    const std::map<std::string, std::string>& env, const ConfigFile& file);

}  // namespace trainctl::client
