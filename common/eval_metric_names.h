#pragma once

// The evaluation metrics a job reports, by name, so that a spec naming one
// (checkpoint.keep_best_by) is checked at submission, not found missing
// after hours of training.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// The "eval_" metrics every evaluation of a job with this spec reports,
// in a fixed order (per-class ones, with training.eval_per_class, are
// patterns: eval_f1_<class>).
std::vector<std::string> EvalMetricNames(const v1::JobSpec& spec);

// OK when `name`, with or without its "eval_" prefix, is one of them;
// else INVALID_ARGUMENT naming it and listing the known ones.
absl::Status CheckEvalMetricName(const v1::JobSpec& spec,
                                 const std::string& name);

}  // namespace trainctl
