#pragma once

// `logs`, `metrics` and `plot`: commands that read a job's event history
// (and, with -f, follow it). Split from commands.cc to keep files small.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "client/command_env.h"

namespace trainctl::client {

struct StreamArgs {
  std::string job_id;
  bool follow = false;
  // logs
  std::vector<int32_t> ranks;
  std::string since;
  // metrics
  std::string format;  // "", "csv" or "jsonl"; "" follows --output
  int64_t from_seq = 1;
  // plot
  std::vector<std::string> plot_jobs;  // several: overlaid
  std::vector<std::string> metrics = {"loss", "eval_accuracy"};
  std::string file;
  bool log_y = false;
  double smoothing = 0;
};

struct StreamCommands {
  CLI::App* logs;
  CLI::App* metrics;
  CLI::App* plot;
};

// Adds the three subcommands to app; their arguments land in args.
StreamCommands AddStreamCommands(CLI::App& app, StreamArgs& args);

int CmdLogs(Env& env, const StreamArgs& args);
int CmdMetrics(Env& env, const StreamArgs& args);
int CmdPlot(Env& env, const StreamArgs& args);

}  // namespace trainctl::client
