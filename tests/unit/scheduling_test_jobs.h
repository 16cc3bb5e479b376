#pragma once

// Queued jobs for the scheduling pass's table tests.

#include <string>

#include "coordinator/scheduler.h"

namespace trainctl::coordinator {

inline PendingJob Job(const std::string& id, int ranks, int priority = 0,
                      const std::string& user = "") {
  PendingJob job;
  job.id = id;
  job.ranks = ranks;
  job.priority = priority;
  job.user = user;
  return job;
}

}  // namespace trainctl::coordinator
