#pragma once

// `trainctl plot -o FILE.png`: the chart of chart_draw.h drawn with cairo
// (anti-aliased, text in DejaVu Sans) and written as a PNG. A build without
// cairo says so instead (TRAINCTL_HAVE_CAIRO).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/chart_draw.h"

namespace trainctl::client {

// The PNG file's bytes. INVALID_ARGUMENT when no series has a point;
// UNIMPLEMENTED in a build without cairo; INTERNAL when cairo fails.
absl::StatusOr<std::string> RenderPngChart(const std::vector<ChartPanel>& panels,
                                           const ChartOptions& options,
                                           int* dropped = nullptr);

}  // namespace trainctl::client
