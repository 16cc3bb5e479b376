#include "common/checkpoint_name.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace trainctl {
namespace {

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

}  // namespace

std::string CheckpointFileName(int64_t step, int generation) {
  return absl::StrFormat("step-%09d-g%d.ckpt", step, generation);
}

std::optional<CheckpointName> ParseCheckpointFileName(std::string_view whole) {
  absl::string_view name(whole.data(), whole.size());
  if (!absl::ConsumePrefix(&name, "step-") || !absl::ConsumeSuffix(&name, ".ckpt")) {
    return std::nullopt;
  }
  CheckpointName parsed;
  const size_t dash = name.find("-g");
  absl::string_view step = name.substr(0, dash);
  if (dash != absl::string_view::npos) {
    absl::string_view generation = name.substr(dash + 2);
    if (!AllDigits(generation) || !absl::SimpleAtoi(generation, &parsed.generation) ||
        parsed.generation < 1) {
      return std::nullopt;
    }
  }
  if (!AllDigits(step) || !absl::SimpleAtoi(step, &parsed.step)) return std::nullopt;
  return parsed;
}

absl::StatusOr<CheckpointRef> ParseCheckpointRef(absl::string_view text,
                                                 absl::string_view field) {
  const size_t colon = text.find(':');
  CheckpointRef ref{std::string(text.substr(0, colon)), std::nullopt};
  int64_t step = -1;
  if (ref.job_id.empty() ||
      (colon != absl::string_view::npos &&
       (!AllDigits(text.substr(colon + 1)) ||
        !absl::SimpleAtoi(text.substr(colon + 1), &step)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": '", text, "' is not JOB or JOB:STEP (a step is a number, "
        "as trainctl checkpoints JOB lists them)"));
  }
  if (colon != absl::string_view::npos) ref.step = step;
  return ref;
}

}  // namespace trainctl
