#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

}  // namespace trainctl
