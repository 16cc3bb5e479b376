#pragma once

// A program run on a pseudo-terminal, for the CLI tests that need a real
// terminal (a live view's redraws, a prompt that must not echo).

#include <chrono>
#include <string>
#include <vector>

namespace trainctl::testing {

struct PtyResult {
  int exit_code = -1;
  std::string output;  // everything written to the terminal, escapes and all
};

// Runs argv with its stdin/stdout/stderr on a new pseudo-terminal of 100x30
// (TERM=xterm) and reads it until the program exits or `timeout` passes
// (then it is killed and exit_code stays -1). `typed` is written to the
// terminal, as typed keys, once the output shows `prompt`.
PtyResult RunInPty(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                   const std::string& prompt = "", const std::string& typed = "");

}  // namespace trainctl::testing
