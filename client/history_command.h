#pragma once

// `trainctl history`: what jobs used (owner, elapsed time, slot-hours and
// GPU-hours, restarts, final metrics), with filters, like Slurm's sacct.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/command_env.h"

namespace trainctl::client {

struct HistoryArgs {
  std::string user;                 // only this owner's jobs
  std::vector<std::string> states;  // state names
  std::string since;                // ParseWhen forms; empty = open
  std::string until;
};

// Adds the `history` subcommand, its flags going to `args`.
CLI::App* AddHistoryCommand(CLI::App& app, HistoryArgs* args);

int CmdHistory(Env& env, const HistoryArgs& args);

}  // namespace trainctl::client
