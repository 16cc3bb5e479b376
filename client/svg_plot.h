#pragma once

// `trainctl plot`: metric history to an SVG line chart. Pure: points in,
// SVG text out, so tests can parse what would be written.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "client/metrics_export.h"

namespace trainctl::client {

struct PlotSeries {
  std::string name;                                // as asked: "eval_accuracy"
  std::vector<std::pair<double, double>> points;  // (step, value), by step
};

// Resolves each metric name against the rows. A name that is a value key
// names that key's values in train rows if they have it, else in the first
// kind that has it (the trainer's eval rows carry "eval_loss" and
// "eval_accuracy"). Otherwise KIND_KEY names KEY of KIND rows ("eval_loss"
// for an eval row's "loss", "train_loss"). When a step has several points
// (steps trained again after a restart) the last one (highest seq) wins, as
// it is the one the job kept. Non-finite values are left out. A name with
// no points gives a series with no points.
std::vector<PlotSeries> ExtractSeries(const std::vector<MetricRow>& rows,
                                      const std::vector<std::string>& names);

// The names ExtractSeries understands for these rows, sorted: every value
// key, plus KIND_KEY for a key that kinds other than its first also carry.
std::vector<std::string> AvailableSeriesNames(
    const std::vector<MetricRow>& rows);

// Up to about `target` round tick values (1, 2 or 5 times a power of ten)
// covering [lo, hi]; lo < hi.
std::vector<double> NiceTicks(double lo, double hi, int target);

struct ChartOptions {
  int width = 800;
  int height = 450;
  std::string title;
  std::string x_label = "step";
};

// Where a chart's parts go: the frame, the data ranges (widened when flat,
// with 5 % headroom in y) and the ticks. Shared by the SVG and PNG
// renderers, so both draw the same chart.
struct ChartLayout {
  double left = 70, right = 170, top = 40, bottom = 50;  // margins, px
  double plot_w = 0, plot_h = 0;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  std::vector<double> x_ticks, y_ticks;
  // Data to pixel coordinates (y grows downwards).
  double X(double x) const { return left + (x - x_lo) / (x_hi - x_lo) * plot_w; }
  double Y(double y) const { return top + (y_hi - y) / (y_hi - y_lo) * plot_h; }
};
// False when no series has a point.
bool LayoutChart(const std::vector<PlotSeries>& series,
                 const ChartOptions& options, ChartLayout* layout);
// The colour of the index-th series drawn ("#0072B2"), cycling.
const char* SeriesColor(int index);
// A tick value as the charts print it ("0", "0.25", "1e+06").
std::string TickLabel(double v);

// A line chart: one <polyline class="series" data-metric=NAME> per series
// with points (one <circle> marks a one-point series), x and y axes with
// ticks and labels, and a legend. Series without points are left out;
// at least one must have points.
std::string RenderSvgChart(const std::vector<PlotSeries>& series,
                           const ChartOptions& options);

}  // namespace trainctl::client
