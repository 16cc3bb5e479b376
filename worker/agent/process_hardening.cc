#include "worker/agent/process_hardening.h"

#include <sys/prctl.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace trainctl::agent {

absl::Status HideFromSameUidProcesses() {
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return absl::InternalError(
        absl::StrCat("prctl(PR_SET_DUMPABLE, 0): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

bool IsAgentSecretVariable(const std::string& name) {
  // CREDENTIALS_DIRECTORY: systemd's LoadCredential= directory (join.token).
  return name == "TRAINCTL_JOIN_TOKEN" || name == "TRAINCTL_JOIN_TOKEN_FILE" ||
         name == "CREDENTIALS_DIRECTORY";
}

}  // namespace trainctl::agent
