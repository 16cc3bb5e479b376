#pragma once

// Which checkpoint files of a job's directory a prune message also removes
// beyond the ones it names (DeleteCheckpoints.stale_below_step).

#include <string>
#include <vector>

#include "trainctl/v1/workers.pb.h"

namespace trainctl::agent {

// The checkpoint files (common/checkpoint_name.h) directly in request.dir()
// of a step below request.stale_below_step(), of any generation (a fenced
// one's too), that request.keep() does not name, sorted.
// Nothing else: no other names, no subdirectories, no temporary files.
std::vector<std::string> StaleCheckpoints(const v1::DeleteCheckpoints& request);

}  // namespace trainctl::agent
