#pragma once

#include <string>

#include "absl/status/status.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl::coordinator {

// Whether a job with spec `to` may start from a checkpoint that job
// `from_job` (spec `from`) wrote. The checkpoint holds that model's
// parameters and optimizer state, and a data cursor counted in that job's
// samples per optimizer step over that training set, so all of these must
// be the same: the task, the model (dropout aside), the optimizer type, the
// global batch (batch_size x grad_accum_steps) and the training data.
// INVALID_ARGUMENT naming the first field that differs, with both values
// (the values are the specs', never the data's).
absl::Status CheckResumeCompatible(const v1::JobSpec& from,
                                   const std::string& from_job,
                                   const v1::JobSpec& to);

}  // namespace trainctl::coordinator
