#pragma once

// The in-process benchmarks run training code outside a rank process; this
// gives them the rank's malloc settings (worker/support/heap_reuse.h) so that
// their numbers mean what a job would see.

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "worker/support/heap_reuse.h"

namespace trainctl::bench {

// GLIBC_TUNABLES are read at exec, so re-exec once with them set; then set
// the rest as the rank does. Returns only in the re-executed process (or if
// exec failed, with the in-process settings alone).
inline void UseRankMallocSettings(char** argv) {
  if (getenv("TRAINCTL_BENCH_RANK_MALLOC") == nullptr) {
    const char* inherited = getenv("GLIBC_TUNABLES");
    const std::string tunables =
        train::RankMallocTunables(inherited != nullptr ? inherited : "");
    setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
    setenv("TRAINCTL_BENCH_RANK_MALLOC", "1", 1);
    execv("/proc/self/exe", argv);
  }
  train::KeepFreedHeapForReuse();
}

}  // namespace trainctl::bench
