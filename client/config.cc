#include "client/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "client/commands.h"

namespace trainctl::client {
namespace {

bool IsOutputFormat(const std::string& value) {
  return value == "table" || value == "json";
}

std::string Lookup(const std::map<std::string, std::string>& env,
                   const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

}  // namespace

std::string ConfigFilePath(const char* xdg_config_home, const char* home) {
  if (xdg_config_home != nullptr && xdg_config_home[0] == '/') {
    return absl::StrCat(xdg_config_home, "/trainctl/config.yaml");
  }
  if (home != nullptr && home[0] != '\0') {
    return absl::StrCat(home, "/.config/trainctl/config.yaml");
  }
  return "";
}

absl::StatusOr<ConfigFile> ParseConfigFile(const std::string& text,
                                           const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file ", path, ": not valid YAML at line ", e.mark.line + 1,
        ": ", e.msg));
  }
  ConfigFile config;
  if (root.IsNull()) return config;  // empty file
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file ", path, ": expected a mapping of keys (coordinator, "
        "output) at the top level"));
  }
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config file ", path, ": keys must be plain names"));
    }
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    if (key != "coordinator" && key != "output") {
      // A typo would otherwise be silently ignored.
      return absl::InvalidArgumentError(
          absl::StrCat("config file ", path, ": unknown key '", key,
                       "' (known: coordinator, output)"));
    }
    if (!value.IsScalar() || value.Scalar().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config file ", path, ": key '", key, "' must be a non-empty string"));
    }
    const std::string text_value = value.Scalar();
    if (key == "coordinator") {
      config.coordinator = text_value;
    } else {
      if (!IsOutputFormat(text_value)) {
        return absl::InvalidArgumentError(
            absl::StrCat("config file ", path, ": key 'output' must be table "
                         "or json, not '", text_value, "'"));
      }
      config.output = text_value;
    }
  }
  return config;
}

absl::StatusOr<ConfigFile> LoadConfigFile(const std::string& path) {
  if (path.empty()) return ConfigFile{};
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    if (errno == ENOENT) return ConfigFile{};
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read config file ", path, ": ", std::strerror(errno)));
  }
  std::string text(std::istreambuf_iterator<char>(in), {});
  return ParseConfigFile(text, path);
}

absl::StatusOr<Settings> ResolveSettings(
    const std::string& flag_coordinator, const std::string& flag_output,
    const std::map<std::string, std::string>& env, const ConfigFile& file) {
  Settings settings;
  const std::string env_coordinator = Lookup(env, "TRAINCTL_COORDINATOR");
  if (!flag_coordinator.empty()) {
    settings.coordinator = flag_coordinator;
  } else if (!env_coordinator.empty()) {
    settings.coordinator = env_coordinator;
  } else {
    settings.coordinator = file.coordinator.value_or(kDefaultCoordinator);
  }
  const std::string env_output = Lookup(env, "TRAINCTL_OUTPUT");
  if (!env_output.empty() && flag_output.empty() &&
      !IsOutputFormat(env_output)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TRAINCTL_OUTPUT must be table or json, not '", env_output, "'"));
  }
  if (!flag_output.empty()) {
    settings.output = flag_output;
  } else if (!env_output.empty()) {
    settings.output = env_output;
  } else {
    settings.output = file.output.value_or("table");
  }
  return settings;
}

}  // namespace trainctl::client
