#pragma once

#include <string>

#include "trainctl/v1/jobs.pb.h"

namespace trainctl {

// "QUEUED", "RUNNING", ... : the enum value's name without its prefix, the
// one spelling that logs, errors and the CLI share; "UNKNOWN" for 0 or a
// value this build does not know.
std::string JobStateName(v1::JobState state);
std::string RankStateName(v1::RankState state);

}  // namespace trainctl
