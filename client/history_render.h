#pragma once

// `trainctl history`: accounting like Slurm's sacct, rendered from the
// coordinator's GetHistory answer.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/render.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

// One row per job: owner, state, submission time, wait, elapsed time,
// ranks, slot-hours and GPU-hours, restarts and preemptions, final loss and
// eval result; then a totals line, with each user's share when there are
// several users.
std::string RenderHistory(const v1::GetHistoryResponse& history,
                          const RenderContext& ctx);

// A --since / --until value as Unix ms: a date or date and time in `tz`
// ("2026-12-01", "2026-12-01 14:30", "2026-12-01T14:30:05"), or an age
// before now ("90m", "36h", "7d", "2w"). INVALID_ARGUMENT naming `flag` and
// the accepted forms otherwise.
absl::StatusOr<int64_t> ParseWhen(const std::string& text, const std::string& flag,
                                  int64_t now_unix_ms, absl::TimeZone tz);

}  // namespace trainctl::client
