#pragma once

// The agent's side of a dry run's data check (security review H2): the
// coordinator sends ProbeDataRequest down the stream instead of opening
// user-named files itself; the agent answers with ProbeDataResult. No torch.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "trainctl/v1/workers.pb.h"

namespace trainctl::agent {

struct DataProbeOptions {
  // Per request; a csv row count on a slow disk is the long case.
  absl::Duration timeout = absl::Seconds(10);
  // Bytes a count may read (csv); larger files are left to the ranks.
  int64_t max_bytes_read = int64_t{256} << 20;
};

// The most bytes of ProbeDataResult.error (cut on a UTF-8 boundary).
inline constexpr size_t kMaxProbeErrorBytes = 1024;

// Checks and counts the request's data files as this process's user (the
// ranks' user), bounded by `options`, and returns the answer to send up:
// the counts, or `error` naming the field and file (never the file's
// bytes), valid UTF-8 and at most kMaxProbeErrorBytes so the coordinator
// can always parse it. Blocks for up to options.timeout: call it off the
// thread that reads the stream.
v1::ProbeDataResult HandleProbeData(const v1::ProbeDataRequest& request,
                                    const DataProbeOptions& options = {});

}  // namespace trainctl::agent
