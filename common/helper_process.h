#pragma once

// Running one of trainctl's own programs as a child and collecting what it
// prints: `trainctl export` runs trainctl-worker, and whatever needs
// SentencePiece runs trainctl-tokenizer (tokenizer_client.h).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainctl {

// `name` beside the running program (an install or a build tree), else on
// PATH; empty when neither has it.
std::string FindSiblingProgram(const std::string& name);

struct ChildResult {
  int exit_code = -1;  // -N: killed by signal N
  std::string output;  // stdout and stderr together (as the child wrote them)
  std::string stdout_text;  // only when RunChild was asked to keep them apart
  bool timed_out = false;   // killed at the deadline
};

// Runs argv[0] with argv and /dev/null as stdin, collecting its output
// (both streams into `output`, or stdout into `stdout_text` and stderr into
// `output` when `separate_stdout`). `pass_fds[i]` is the child's
// descriptor 3 + i (/dev/fd/3, ...): files that never need a name. Past
// `deadline` the child is killed (SIGKILL) and reaped, with timed_out set.
// The child is also killed when this process dies first (PR_SET_PDEATHSIG).
// FAILED_PRECONDITION when it cannot be started.
absl::StatusOr<ChildResult> RunChild(const std::vector<std::string>& argv,
                                     absl::Time deadline = absl::InfiniteFuture(),
                                     bool separate_stdout = false,
                                     const std::vector<int>& pass_fds = {});

}  // namespace trainctl
