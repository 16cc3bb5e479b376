#include "coordinator/auth/token_store.h"

#include <sys/stat.h>

#include <ctime>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/pki.h"

namespace trainctl::coordinator::auth {

absl::Status TokenStore::ReloadIfChangedLocked() {
  struct stat st;
  if (stat(path_.c_str(), &st) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot read the token file ", path_,
        "; run `trainctl-coordinator init` to create it"));
  }
  Stamp now{int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
            int64_t(st.st_size), int64_t(st.st_ino)};
  if (now == loaded_) return absl::OkStatus();
  absl::StatusOr<std::string> text = ReadWholeFile(path_);
  if (!text.ok()) return absl::UnavailableError(text.status().message());
  std::unordered_map<std::string, TokenHolder> parsed;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    TokenHolder holder;
    bool ok = (fields.size() == 3 || fields.size() == 4) &&
              fields[2].size() == 64;
    if (ok && fields.size() == 4) {
      ok = absl::ConsumePrefix(&fields[3], "expires=") &&
           absl::SimpleAtoi(fields[3], &holder.expires_unix_s) &&
           holder.expires_unix_s > 0;
    }
    if (ok && fields[0] == "admin") {
      holder.role = TokenRole::kAdmin;
    } else if (ok && fields[0] == "user") {
      holder.role = TokenRole::kUser;
    } else if (ok && fields[0] == "join") {
      holder.role = TokenRole::kJoin;
    } else {
      // One bad line must not lock everyone out; say where it is.
      TLOG_WARNING << path_ << ":" << line_number
                   << ": ignored (want: admin|user|join NAME SHA256 "
                      "[expires=UNIX_SECONDS])";
      continue;
    }
    holder.name = std::string(fields[1]);
    parsed[std::string(fields[2])] = holder;
  }
  by_digest_ = std::move(parsed);
  loaded_ = now;
  TLOG_INFO << "loaded " << by_digest_.size() << " tokens from " << path_;
  return absl::OkStatus();
}

absl::StatusOr<TokenHolder> TokenStore::Lookup(absl::string_view token) {
  const std::string digest = pki::Sha256Hex(token);
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = ReloadIfChangedLocked(); !s.ok()) return s;
  auto it = by_digest_.find(digest);
  if (it == by_digest_.end()) {
    return absl::UnauthenticatedError(
        "unknown or revoked token; ask an admin for one "
        "(`trainctl-coordinator add-user NAME`) and run `trainctl login`");
  }
  if (it->second.expires_unix_s > 0 &&
      static_cast<int64_t>(std::time(nullptr)) >= it->second.expires_unix_s) {
    absl::Status expired = absl::UnauthenticatedError(absl::StrCat(
        "the token of '", it->second.name, "' expired at ",
        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                         absl::FromUnixSeconds(it->second.expires_unix_s),
                         absl::UTCTimeZone()),
        "; ask an admin for a new one"));
    expired.SetPayload(kExpiredPayload, absl::Cord());
    return expired;
  }
  return it->second;
}

}  // namespace trainctl::coordinator::auth
