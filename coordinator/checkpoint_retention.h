#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl::coordinator {

// The value of the spec's keep_best_by metric in a checkpoint's evaluation,
// if it has one. The "eval_" prefix of evaluation metrics is optional
// ("eval_accuracy" and "accuracy" are the same metric).
std::optional<double> BestByValue(const v1::Checkpoint& checkpoint,
                                  const v1::CheckpointSpec& spec);

// Retention as a pure function: the steps of the catalog (any order) to
// delete. Kept: the newest keep_last (all when 0), the best by keep_best_by
// (min or max per keep_best_mode) among those that have the metric, and
// always the newest one, which a restart resumes from.
std::vector<int64_t> CheckpointsToPrune(
    const std::vector<v1::Checkpoint>& catalog, const v1::CheckpointSpec& spec);

}  // namespace trainctl::coordinator
