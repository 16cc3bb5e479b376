#pragma once

// `trainctl plot`'s data: metric history to series (one per job and
// metric), smoothing, and the tick values and colours of its charts. Pure.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "client/metrics_export.h"

namespace trainctl::client {

struct PlotSeries {
  std::string name;                                // the metric: "eval_accuracy"
  std::string label;                               // whose: "job-3 mlp" (overlays)
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
std::vector<std::string> AvailableSeriesNames(const std::vector<MetricRow>& rows);

// TensorBoard's smoothing: an exponential moving average with weight
// `weight` in [0, 1), debiased so the first points are not pulled to 0.
// weight 0 returns the points unchanged.
std::vector<std::pair<double, double>> Smooth(
    const std::vector<std::pair<double, double>>& points, double weight);

// Up to about `target` round tick values (1, 2 or 5 times a power of ten)
// covering [lo, hi]; lo < hi.
std::vector<double> NiceTicks(double lo, double hi, int target);
// Ticks of a log axis over [lo, hi] (0 < lo < hi): the powers of ten inside
// it, with 2x and 5x them when fewer than three powers fit, and the round
// linear ticks when not even that gives two.
std::vector<double> LogTicks(double lo, double hi);

// The colour of the index-th series ("#0072B2"), cycling.
const char* SeriesColor(int index);
// A tick value as the charts print it ("0", "0.25", "1e+06").
std::string TickLabel(double v);

}  // namespace trainctl::client
