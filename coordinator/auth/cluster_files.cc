#include "coordinator/auth/cluster_files.h"

#include "coordinator/auth/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/pki.h"
#include "common/status_macros.h"

namespace trainctl::coordinator::auth {
namespace {

constexpr int64_t kCaDays = 3650;
constexpr int64_t kServerDays = 1825;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::Status MakePrivateDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec) {
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
  }
  if (ec) {
    return absl::UnavailableError(absl::StrCat(
        "cannot create ", dir, ": ", ec.message(), "; pass a writable --state-dir"));
  }
  return absl::OkStatus();
}

// Atomic write, readable by the owner only from the first byte; an
// existing file keeps its owner (root editing a service user's file).
absl::Status WritePrivate(const std::string& path, const std::string& text) {
  AtomicWriteOptions options;
  options.mode = 0600;
  options.keep_owner = true;
  return WriteFileAtomically(path, text, options);
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

ClusterFiles::ClusterFiles(const std::string& state_dir)
    : ca_cert(state_dir + "/tls/ca.crt"),
      ca_key(state_dir + "/tls/ca.key"),
      server_cert(state_dir + "/tls/server.crt"),
      server_key(state_dir + "/tls/server.key"),
      tokens(state_dir + "/auth/tokens"),
      admin_token(state_dir + "/auth/admin.token"),
      join_token(state_dir + "/auth/join.token"),
      rendezvous_key(state_dir + "/auth/rendezvous.key") {}

const char* TokenRoleName(TokenRole role) {
  switch (role) {
    case TokenRole::kUser: return "user";
    case TokenRole::kAdmin: return "admin";
    case TokenRole::kJoin: return "join";
  }
  return "user";
}

absl::Status CheckName(const std::string& what, const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                c == '_' || c == '@' || c == '-');
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", name, "': use 1 to 64 of the characters A-Z a-z 0-9 . _ @ -"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseTokenLifetime(const std::string& flag,
                                           const std::string& text) {
  int64_t number = 0;
  int64_t unit = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      default: break;
    }
  }
  if (unit == 0 || !absl::SimpleAtoi(text.substr(0, text.size() - 1), &number) ||
      number <= 0 || number > 3650 * 86400 / unit) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " '", text, "': want a whole number of s, m, h or d, e.g. 2h "
        "(at most 10 years)"));
  }
  return number * unit;
}

absl::StatusOr<std::string> AddToken(const std::string& state_dir,
                                     TokenRole role, const std::string& name,
                                     int64_t expires_unix_s) {
  RETURN_IF_ERROR(CheckName("name", name));
  ClusterFiles files(state_dir);
  RETURN_IF_ERROR(MakePrivateDir(state_dir + "/auth"));
  DirLock lock(state_dir + "/auth");
  if (!lock.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot lock ", state_dir, "/auth/.lock: ", std::strerror(errno)));
  }
  std::string existing;
  absl::StatusOr<std::string> read = ReadWholeFile(files.tokens);
  if (read.ok()) {
    existing = *std::move(read);
  } else if (!absl::IsNotFound(read.status())) {
    return read.status();
  } else {
    existing =
        "# trainctl tokens: ROLE NAME SHA256(token). Add with\n"
        "# `trainctl-coordinator add-user NAME [--admin]`; delete a line to\n"
        "# revoke (the coordinator rereads this file when it changes).\n";
  }
  if (!existing.empty() && existing.back() != '\n') existing += '\n';
  const std::string token = pki::RandomToken(
      role == TokenRole::kJoin ? "tcjoin_" : "tcu_");
  existing += absl::StrCat(TokenRoleName(role), " ", name, " ",
                           pki::Sha256Hex(token));
  if (expires_unix_s > 0) absl::StrAppend(&existing, " expires=", expires_unix_s);
  existing += "\n";
  RETURN_IF_ERROR(WritePrivate(files.tokens, existing));
  return token;
}

absl::StatusOr<InitReport> InitCluster(
    const std::string& state_dir, const std::vector<std::string>& server_names) {
  ClusterFiles files(state_dir);
  RETURN_IF_ERROR(MakePrivateDir(state_dir));
  RETURN_IF_ERROR(MakePrivateDir(state_dir + "/tls"));
  RETURN_IF_ERROR(MakePrivateDir(state_dir + "/auth"));
  InitReport report;

  if (!Exists(files.ca_cert) || !Exists(files.ca_key)) {
    if (Exists(files.server_cert)) {
      return absl::FailedPreconditionError(absl::StrCat(
          files.server_cert, " exists but the CA that signed it is missing; "
          "remove the tls directory to start a new CA (workers must join again)"));
    }
    ASSIGN_OR_RETURN(std::string key, pki::NewPrivateKey());
    ASSIGN_OR_RETURN(std::string cert,
                     pki::SelfSignedCa(key, "trainctl cluster CA", kCaDays));
    RETURN_IF_ERROR(WritePrivate(files.ca_key, key));
    RETURN_IF_ERROR(WriteFileAtomically(files.ca_cert, cert));
    report.created.push_back(files.ca_cert);
  }
  if (!Exists(files.server_cert) || !Exists(files.server_key)) {
    ASSIGN_OR_RETURN(std::string ca_cert, ReadWholeFile(files.ca_cert));
    ASSIGN_OR_RETURN(std::string ca_key, ReadWholeFile(files.ca_key));
    ASSIGN_OR_RETURN(std::string key, pki::NewPrivateKey());
    pki::CertificateOrder order;
    order.common_name = "trainctl-coordinator";
    order.usage = pki::Usage::kServer;
    order.valid_days = kServerDays;
    order.alt_names = {"localhost", "127.0.0.1", "::1"};
    if (std::string host = HostName(); !host.empty()) {
      order.alt_names.push_back(host);
    }
    for (const std::string& name : server_names) {
      if (!name.empty()) order.alt_names.push_back(name);
    }
    ASSIGN_OR_RETURN(std::string cert,
                     pki::IssueCertificate(ca_cert, ca_key, key, order));
    RETURN_IF_ERROR(WritePrivate(files.server_key, key));
    RETURN_IF_ERROR(WriteFileAtomically(files.server_cert, cert));
    report.created.push_back(files.server_cert);
  }
  if (!Exists(files.rendezvous_key)) {
    RETURN_IF_ERROR(WritePrivate(files.rendezvous_key, pki::RandomToken("")));
    report.created.push_back(files.rendezvous_key);
  }
  struct Seed {
    const std::string& path;
    TokenRole role;
    const char* name;
    std::string* out;
  };
  for (const Seed& seed :
       {Seed{files.admin_token, TokenRole::kAdmin, "admin", &report.admin_token},
        Seed{files.join_token, TokenRole::kJoin, "workers", &report.join_token}}) {
    if (absl::StatusOr<std::string> have = ReadWholeFile(seed.path); have.ok()) {
      *seed.out = *have;
      while (!seed.out->empty() && seed.out->back() == '\n') seed.out->pop_back();
      continue;
    }
    ASSIGN_OR_RETURN(*seed.out, AddToken(state_dir, seed.role, seed.name));
    RETURN_IF_ERROR(WritePrivate(seed.path, *seed.out + "\n"));
    report.created.push_back(seed.path);
  }
  return report;
}

}  // namespace trainctl::coordinator::auth
