#pragma once

// `trainctl watch` (and `submit --follow`) on a terminal: the live view of
// client/live_view.h redrawn in place while the job's events stream in.

#include <string>

#include "client/command_env.h"

namespace trainctl::client {

// Follows the job until it is final, redrawing the view on each event and
// once a second from a GetJob snapshot (start-up progress, ranks, ETA), and
// printing state changes above it. Returns the exit code of the job's final
// state, or that of the error that ended the watch.
int WatchLive(Env& env, const std::string& job_id, int width);

}  // namespace trainctl::client
