#pragma once

// Command wiring of trainctl: parses the command line with CLI11, calls the
// coordinator and prints through the renderers.

#include <ostream>
#include <string>

namespace trainctl::client {

// Default coordinator address when neither flag, environment nor config
// file names one (see ResolveSettings in client/config.h).
inline constexpr char kDefaultCoordinator[] = "127.0.0.1:7070";

// Runs trainctl on argv and returns the process exit code (see ExitCode in
// client/format.h). Normal output goes to out, diagnostics to err. Never
// throws: CLI11's parse exceptions are handled here.
int RunCli(int argc, const char* const* argv, std::ostream& out,
           std::ostream& err);

}  // namespace trainctl::client
