#include "client/login_command.h"

#include <termios.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/format.h"
#include "common/atomic_file.h"

namespace trainctl::client {
namespace {

std::string StateDir() {
  const char* xdg = std::getenv("XDG_STATE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return absl::StrCat(xdg, "/trainctl");
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : ".", "/.local/state/trainctl");
}

bool Readable(const std::string& path) {
  return !path.empty() && access(path.c_str(), R_OK) == 0;
}

}  // namespace

LocalCoordinatorFiles DefaultLocalCoordinatorFiles() {
  const std::string dir = StateDir();
  return {dir + "/tls/ca.crt", dir + "/auth/admin.token"};
}

absl::StatusOr<ClientSecurity> ResolveSecurity(
    const Settings& settings, const LocalCoordinatorFiles& local) {
  ClientSecurity security;
  security.insecure = settings.insecure;
  if (settings.insecure) return security;
  std::string ca_path = settings.ca_cert;
  if (ca_path.empty() && Readable(local.ca_cert)) ca_path = local.ca_cert;
  if (!ca_path.empty()) {
    absl::StatusOr<std::string> ca = ReadWholeFile(ca_path);
    if (!ca.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot read the CA certificate ", ca_path, " (--ca-cert, "
          "TRAINCTL_CA_CERT or ca_cert: in the config file): ",
          ca.status().message()));
    }
    security.ca_pem = *std::move(ca);
  }
  security.token = settings.token;
  if (security.token.empty() && settings.ca_cert.empty() &&
      Readable(local.admin_token)) {
    absl::StatusOr<std::string> token = ReadWholeFile(local.admin_token);
    if (token.ok()) {
      security.token = std::string(absl::StripAsciiWhitespace(*token));
    }
  }
  if (!security.token.empty() && security.ca_pem.empty()) {
    // Without the cluster CA, any certificate a public CA signed for the
    // host would be trusted, and the token sent to it.
    return absl::InvalidArgumentError(
        "--ca-cert: needed to verify the coordinator before a token is sent "
        "(the coordinator's tls/ca.crt; or TRAINCTL_CA_CERT, ca_cert: in the "
        "config file)");
  }
  return security;
}

CLI::App* AddLoginCommand(CLI::App& app) {
  CLI::App* login = app.add_subcommand(
      "login", "Check a token against the coordinator and save it (with "
               "--coordinator and --ca-cert) in the config file");
  login->footer(
      "\nThe token comes from --token, or is read from stdin. The config file "
      "is written with mode 0600.\n\nExamples:\n"
      "  trainctl login --coordinator head:7070 --ca-cert ca.crt --token tcu_...\n"
      "  ssh head cat /var/lib/trainctl/auth/admin.token | trainctl login "
      "--coordinator head:7070 --ca-cert ca.crt");
  return login;
}

int CmdLogin(const Settings& settings, const std::string& config_path,
             std::istream& in, std::ostream& out, std::ostream& err) {
  if (settings.insecure) {
    err << "trainctl login: --insecure talks to a coordinator without "
           "authentication; there is nothing to log in to\n";
    return kExitUsage;
  }
  Settings checked = settings;
  if (checked.token.empty()) {
    std::string line;
    if (&in == &std::cin && isatty(STDIN_FILENO)) {
      // Typed at a terminal: not echoed, as passwd and ssh read secrets.
      // Echo goes off before the prompt shows, so no key is echoed early.
      termios saved{};
      const bool quiet = tcgetattr(STDIN_FILENO, &saved) == 0;
      if (quiet) {
        termios silent = saved;
        silent.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent);
      }
      err << "Token: " << std::flush;
      std::getline(in, line);
      if (quiet) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
      err << "\n";
    } else {
      std::getline(in, line);
    }
    checked.token = std::string(absl::StripAsciiWhitespace(line));
  }
  if (checked.token.empty()) {
    err << "trainctl login: no token: pass --token or give it on stdin\n";
    return kExitUsage;
  }
  std::string ca_path = checked.ca_cert;
  if (!ca_path.empty()) {
    std::error_code ec;
    ca_path = std::filesystem::absolute(ca_path, ec).string();
    checked.ca_cert = ca_path;
  }
  absl::StatusOr<ClientSecurity> security = ResolveSecurity(checked, {});
  if (!security.ok()) {
    err << "trainctl login: " << security.status().message() << "\n";
    return kExitUsage;
  }
  CoordinatorClient client(checked.coordinator, *security);
  absl::StatusOr<v1::ListJobsResponse> probe = client.ListJobs({});
  if (!probe.ok()) {
    if (probe.status().code() == absl::StatusCode::kUnauthenticated) {
      // The server's advice ("... and run trainctl login") is for the
      // other commands; here it would send the user in a circle.
      err << "trainctl login: " << client.address()
          << " refused this token (unknown or revoked); nothing was saved. An "
             "admin makes one with `trainctl-coordinator add-user NAME`\n";
    } else {
      err << "trainctl login: " << DescribeError(probe.status(), client.address())
          << "\n";
    }
    return ExitCodeForStatus(probe.status());
  }
  std::map<std::string, std::string> values = {
      {"coordinator", checked.coordinator}, {"token", checked.token}};
  if (!ca_path.empty()) values["ca_cert"] = ca_path;
  if (absl::Status saved = SetConfigValues(config_path, values); !saved.ok()) {
    err << "trainctl login: " << saved.message() << "\n";
    return kExitFailed;
  }
  out << "token accepted by " << checked.coordinator << "; saved to "
      << config_path << " (mode 0600)\n";
  return kExitOk;
}

}  // namespace trainctl::client
