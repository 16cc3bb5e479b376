#pragma once

// `trainctl export JOB[:STEP] -o FILE`: a checkpoint's model in a format
// Python loads. safetensors for any model (examples/trainctl_models.py
// rebuilds the built-in ones), and a TorchScript job's module with its
// trained weights. The coordinator says where the checkpoint is; the
// conversion needs torch, so trainctl runs `trainctl-worker export` on this
// machine, which must see the checkpoint file (checkpoint.dir on a shared
// filesystem, or the node that wrote it).

#include <string>

#include <CLI/CLI.hpp>

#include "client/command_env.h"

namespace trainctl::client {

struct ExportArgs {
  std::string ref;     // JOB or JOB:STEP
  std::string out;     // the file to write
  std::string format;  // safetensors | torchscript; empty: from out's name
};

// Adds the `export` subcommand, its arguments going to `args`.
CLI::App* AddExportCommand(CLI::App& app, ExportArgs* args);

int CmdExport(Env& env, const ExportArgs& args);

}  // namespace trainctl::client
