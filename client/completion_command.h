#pragma once

// `trainctl completion bash|zsh`: a shell completion script generated from
// the CLI's own command tree, so it never falls behind a new command or
// flag. Commands that take a job id complete the ids `trainctl list -q`
// prints; `submit` completes file names. Needs no coordinator.

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace trainctl::client {

// Adds the `completion` subcommand (its SHELL argument goes to `shell`).
CLI::App* AddCompletionCommand(CLI::App& app, std::string* shell);

// Writes the script for `shell` ("bash" or "zsh"; CLI11 checked it) for
// every subcommand and option of `app`; returns exit code 0.
int PrintCompletion(const CLI::App& app, const std::string& shell,
                    std::ostream& out);

}  // namespace trainctl::client
