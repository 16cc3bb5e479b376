#pragma once

// The commands that are one call to the coordinator and a rendering of its
// answer: list, status, cancel, delete, checkpoints, workers. Each returns
// the exit code (commands.h); errors go to env.err in the CLI's words.

#include <string>
#include <vector>

#include "client/command_env.h"

namespace trainctl::client {

// `quiet`: only the ids, one a line. `watch`: then a line per state change
// (list -w) until interrupted.
int CmdList(Env& env, const std::vector<std::string>& state_names, bool all,
            bool quiet, bool watch = false);
int CmdStatus(Env& env, const std::string& job_id);
int CmdCancel(Env& env, const std::string& job_id, const std::string& reason);
// Tries every id; the exit code is that of the last failure.
int CmdDelete(Env& env, const std::vector<std::string>& job_ids);
int CmdCheckpoints(Env& env, const std::string& job_id);
int CmdWorkers(Env& env);
// The queue with the scheduling policy and each user's standing.
int CmdQueue(Env& env);
// Moves a job to another priority class; prints where it stands then.
int CmdPriority(Env& env, const std::string& job_id, const std::string& priority);

}  // namespace trainctl::client
