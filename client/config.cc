#include "client/config.h"

#include <yaml-cpp/yaml.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
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

std::optional<bool> ParseBool(const std::string& text) {
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  return std::nullopt;
}

// A flag, else the variable, else the file's value, else "".
std::string Pick(const std::string& flag, const std::string& env_value,
                 const std::optional<std::string>& file_value) {
  if (!flag.empty()) return flag;
  if (!env_value.empty()) return env_value;
  return file_value.value_or("");
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
    if (key != "coordinator" && key != "output" && key != "token" &&
        key != "ca_cert" && key != "insecure") {
      // A typo would otherwise be silently ignored.
      return absl::InvalidArgumentError(absl::StrCat(
          "config file ", path, ": unknown key '", key,
          "' (known: coordinator, output, token, ca_cert, insecure)"));
    }
    if (!value.IsScalar() || value.Scalar().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config file ", path, ": key '", key, "' must be a non-empty string"));
    }
    const std::string text_value = value.Scalar();
    if (key == "coordinator") {
      config.coordinator = text_value;
    } else if (key == "token") {
      config.token = text_value;
    } else if (key == "ca_cert") {
      config.ca_cert = text_value;
    } else if (key == "insecure") {
      std::optional<bool> flag = ParseBool(text_value);
      if (!flag) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config file ", path, ": key 'insecure' must be true or false, "
            "not '", text_value, "'"));
      }
      config.insecure = *flag;
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

absl::StatusOr<std::string> CoordinatorAddress(const std::string& address,
                                               const std::string& source) {
  constexpr char kDefaultPort[] = "7070";
  if (address.rfind("unix:", 0) == 0 || address.find("://") != std::string::npos) {
    return address;
  }
  std::string host = address, port;
  if (!address.empty() && address.front() == '[') {  // [IPv6] or [IPv6]:PORT
    const size_t close = address.find(']');
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": '", address, "' opens [ without closing it"));
    }
    host = address.substr(0, close + 1);
    if (close + 1 < address.size()) {
      if (address[close + 1] != ':') {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": '", address, "': expected [IPv6]:PORT"));
      }
      port = address.substr(close + 2);
      if (port.empty()) port = "-";  // "[::1]:" names no port
    }
  } else {
    const size_t colon = address.find(':');
    if (colon != std::string::npos && address.find(':', colon + 1) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": '", address, "' looks like an IPv6 address; write it in "
          "brackets, as [", address, "]:", kDefaultPort));
    }
    if (colon != std::string::npos) {
      host = address.substr(0, colon);
      port = address.substr(colon + 1);
      if (port.empty()) port = "-";
    }
  }
  if (host.empty() || host == "[]") {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": '", address, "' names no host (expected HOST:PORT, e.g. head:7070)"));
  }
  if (port.empty()) return absl::StrCat(host, ":", kDefaultPort);
  const bool digits = port.size() <= 5 &&
                      port.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": '", address, "': the port must be a number in 1-65535"));
  }
  return address;
}

absl::StatusOr<Settings> ResolveSettings(
    const std::string& flag_coordinator, const std::string& flag_output,
    const std::map<std::string, std::string>& env, const ConfigFile& file,
    const SecurityFlags& flags) {
  Settings settings;
  const std::string env_coordinator = Lookup(env, "TRAINCTL_COORDINATOR");
  std::string source;
  if (!flag_coordinator.empty()) {
    settings.coordinator = flag_coordinator;
    source = "--coordinator";
  } else if (!env_coordinator.empty()) {
    settings.coordinator = env_coordinator;
    source = "TRAINCTL_COORDINATOR";
  } else {
    settings.coordinator = file.coordinator.value_or(kDefaultCoordinator);
    source = "coordinator: in the config file";
  }
  absl::StatusOr<std::string> address = CoordinatorAddress(settings.coordinator, source);
  if (!address.ok()) return address.status();
  settings.coordinator = *address;
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
  settings.token = Pick(flags.token, Lookup(env, "TRAINCTL_TOKEN"), file.token);
  settings.ca_cert =
      Pick(flags.ca_cert, Lookup(env, "TRAINCTL_CA_CERT"), file.ca_cert);
  const std::string env_insecure = Lookup(env, "TRAINCTL_INSECURE");
  if (flags.insecure) {
    settings.insecure = true;
  } else if (!env_insecure.empty()) {
    std::optional<bool> flag = ParseBool(env_insecure);
    if (!flag) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TRAINCTL_INSECURE must be true or false, not '", env_insecure, "'"));
    }
    settings.insecure = *flag;
  } else {
    settings.insecure = file.insecure.value_or(false);
  }
  return settings;
}

absl::Status SetConfigValues(const std::string& path,
                             const std::map<std::string, std::string>& values) {
  if (path.empty()) {
    return absl::FailedPreconditionError(
        "no config file location: set HOME or XDG_CONFIG_HOME");
  }
  YAML::Node root;
  std::ifstream in(path, std::ios::binary);
  if (in.is_open()) {
    std::string text(std::istreambuf_iterator<char>(in), {});
    absl::StatusOr<ConfigFile> valid = ParseConfigFile(text, path);
    if (!valid.ok()) return valid.status();
    root = YAML::Load(text);
  }
  if (!root.IsMap()) root = YAML::Node(YAML::NodeType::Map);
  for (const auto& [key, value] : values) root[key] = value;
  YAML::Emitter emitter;
  emitter << root;
  const std::string dir = path.substr(0, path.rfind('/'));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  // 0600 from the first byte: the file holds a token.
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  fchmod(fd, 0600);
  const std::string text = std::string(emitter.c_str()) + "\n";
  const bool written = write(fd, text.data(), text.size()) == ssize_t(text.size());
  const bool synced = fsync(fd) == 0;
  close(fd);
  if (!written || !synced || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace trainctl::client
