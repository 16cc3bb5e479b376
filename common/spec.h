#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// Parses a job spec written as YAML or JSON, fills in defaults and validates
// every field. On failure the status is INVALID_ARGUMENT and its message
// lists every problem found, each naming its field path
// (for example "optimizer.lr: must be > 0, got -1"). Unknown fields are
// errors. Pure function; safe from any thread.
absl::StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text);

// The spec as indented JSON with every field shown (for --dry-run, status).
std::string JobSpecToJson(const v1::JobSpec& spec);

// Per-rank batch: the global batch divided evenly over the ranks.
inline int64_t PerRankBatch(const v1::JobSpec& spec) {
  return spec.training().batch_size() / spec.ranks();
}

}  // namespace trainctl
