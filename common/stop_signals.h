#pragma once

// How the daemons stop: SIGINT and SIGTERM are blocked in every thread and
// taken by one waiting thread (sigwait), so no handler runs inside a gRPC
// or SQLite call; SIGPIPE is ignored (a closed peer is an error return).

#include <signal.h>

namespace trainctl {

// Call before starting any thread: the threads inherit the mask.
sigset_t BlockStopSignals();

// Blocks until one of `signals` arrives; returns its number.
int WaitForStopSignal(const sigset_t& signals);

}  // namespace trainctl
