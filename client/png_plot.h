#pragma once

// `trainctl plot -o FILE.png`: the chart of client/svg_plot.h rasterised
// (same layout, ticks, colours and legend) and written as a PNG with zlib.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/raster.h"
#include "client/svg_plot.h"

namespace trainctl::client {

// An 8-bit RGB PNG (colour type 2, no interlace, filter 0 on every row):
// signature, IHDR, one IDAT, IEND. INTERNAL when zlib fails.
absl::StatusOr<std::string> EncodePng(const Canvas& canvas);

// Draws the chart: white background, light grid, axes with ticks and tick
// labels, each series as a 2-pixel line in SeriesColor(i) (a disc for a
// one-point series), a legend and the title. Empty canvas size 0 when no
// series has points.
Canvas RasterizeChart(const std::vector<PlotSeries>& series,
                      const ChartOptions& options);

// RasterizeChart then EncodePng; INVALID_ARGUMENT when nothing to draw.
absl::StatusOr<std::string> RenderPngChart(const std::vector<PlotSeries>& series,
                                           const ChartOptions& options);

}  // namespace trainctl::client
