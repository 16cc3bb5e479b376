#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainctl {

// A checkpoint's file name in <checkpoint.dir>/<job id>/: the step it
// holds and the generation that wrote it, "step-000000040-g2.ckpt". The
// generation fences: a rank cut off from the coordinator that trains on
// after its job moved to a new generation writes its own files, never over
// a file the catalog names for the new one. Files of releases before the
// generation was in the name, "step-000000040.ckpt", parse with
// generation 0.
std::string CheckpointFileName(int64_t step, int generation);

struct CheckpointName {
  int64_t step = 0;
  int generation = 0;  // 0: a name without one
};
// nullopt for anything else (temporaries, other files).
std::optional<CheckpointName> ParseCheckpointFileName(std::string_view name);

// How people name a checkpoint: "JOB" (its newest) or "JOB:STEP"
// (--resume-from, trainctl export).
struct CheckpointRef {
  std::string job_id;
  std::optional<int64_t> step;  // nullopt: the newest
};
// INVALID_ARGUMENT, naming `field` and the text, when it is neither.
absl::StatusOr<CheckpointRef> ParseCheckpointRef(absl::string_view text,
                                                 absl::string_view field);

}  // namespace trainctl
