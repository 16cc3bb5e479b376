#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// Counts a spec's training samples from file headers and sizes, without
// loading the data or linking torch (the coordinator uses it for dry runs).
// Applies train_limit and the eval_fraction split exactly as the ranks do.
// UNIMPLEMENTED for `tensors` files (reading them needs torch);
// INVALID_ARGUMENT naming the field when a file cannot be read here.
absl::StatusOr<int64_t> CountTrainSamples(const v1::DataSpec& data);

// Optimizer steps the job will run: epochs x floor(samples / (batch_size x
// grad_accum_steps)), capped by max_steps.
absl::StatusOr<int64_t> TotalSteps(const v1::JobSpec& spec);

}  // namespace trainctl
