#pragma once

// What keeps a rank (same uid as the agent) away from the agent's secrets.

#include <map>
#include <string>

#include "absl/status/status.h"

namespace trainctl::agent {

// Makes this process non-dumpable (PR_SET_DUMPABLE 0): a process of the
// same uid can then neither ptrace it nor open /proc/<pid>/environ, mem or
// fd/. That matters because the join token may have come in the
// environment (Slurm passes TRAINCTL_JOIN_TOKEN), and unsetenv does not
// scrub /proc/<pid>/environ. Children are dumpable again after exec, so
// ranks stay debuggable.
absl::Status HideFromSameUidProcesses();

// Variables of the agent's environment a rank must not inherit: how the
// agent authenticates (its join token, or where it is kept).
bool IsAgentSecretVariable(const std::string& name);

}  // namespace trainctl::agent
