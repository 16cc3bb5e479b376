#pragma once

// The worker's composition root: from its command line to a running agent
// (or a join step). main.cc dispatches `rank` to the training code and
// everything else here; the decisions that can be got wrong (who runs the
// ranks, where the join token comes from) are functions with unit tests
// (tests/unit/worker_node_test.cc).

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "worker/agent/agent.h"
#include "worker/agent/worker_credentials.h"

namespace CLI {
class App;
}

namespace trainctl::worker {

struct WorkerFlags {
  agent::AgentOptions agent;
  agent::WorkerTlsOptions tls;
  std::string gpus = "auto";
  std::string join_token_file;
  std::string data_cache_dir;
  std::string health_listen;
  std::string health_port_file;
  bool join_only = false;
  std::string rank_user;
  bool allow_root_ranks = false;
};

// Every flag of trainctl-worker, bound to `flags`.
void AddWorkerFlags(CLI::App& app, WorkerFlags& flags);

// Who the ranks run as, for a worker running as `euid`: `--rank-user`'s
// user when that is another one (which needs root), nullopt for the
// worker's own. A root worker without --rank-user refuses job code unless
// --allow-root-ranks (or it only joins). Errors say which flag to give.
using UserLookup =
    std::function<absl::StatusOr<agent::RankCommand::User>(const std::string&)>;
absl::StatusOr<std::optional<agent::RankCommand::User>> RankUser(
    const WorkerFlags& flags, uid_t euid, const UserLookup& look_up);

// The join token in `path` (--join-token-file), without the whitespace
// around it. Errors name the flag and the file, never its contents.
absl::StatusOr<std::string> ReadJoinTokenFile(const std::string& path);

// Runs the worker until SIGINT or SIGTERM (or, with --join-only, until its
// certificate is kept). Returns the process's exit code.
int RunWorker(WorkerFlags flags);

}  // namespace trainctl::worker
