#pragma once

// `trainctl plot -o FILE.svg`: the chart of chart_draw.h as SVG text.

#include <string>
#include <vector>

#include "client/chart_draw.h"

namespace trainctl::client {

// The chart as an SVG document: each panel a <g class="panel"
// data-metric=...>, each data line a <polyline class="series" (or "raw"
// under a smoothed one) data-metric=... data-series=LABEL>, a lone point a
// <circle>. Empty when no series has a point.
std::string RenderSvgChart(const std::vector<ChartPanel>& panels,
                           const ChartOptions& options, int* dropped = nullptr);

}  // namespace trainctl::client
