#include "client/chart_data.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/vocabulary.h"

namespace trainctl::client {
namespace {

// Colour-blind-friendly palette (Okabe-Ito), cycled.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73",
                                   "#CC79A7", "#E69F00", "#56B4E9",
                                   "#F0E442", "#000000"};

// Kinds that carry each value key, train first, then by first appearance.
std::map<std::string, std::vector<std::string>> KindsByKey(
    const std::vector<MetricRow>& rows) {
  std::map<std::string, std::vector<std::string>> kinds;
  for (const MetricRow& row : rows) {
    for (const auto& [key, value] : row.point.values()) {
      std::vector<std::string>& list = kinds[key];
      if (std::find(list.begin(), list.end(), row.point.kind()) != list.end()) {
        continue;
      }
      if (ParseMetricKind(row.point.kind()) == MetricKind::kTrain) {
        list.insert(list.begin(), row.point.kind());
      } else {
        list.push_back(row.point.kind());
      }
    }
  }
  return kinds;
}

}  // namespace

std::string TickLabel(double v) {
  if (v == 0) return "0";
  return absl::StrFormat("%.6g", v);
}

const char* SeriesColor(int index) {
  return kColors[index % static_cast<int>(std::size(kColors))];
}

std::vector<PlotSeries> ExtractSeries(const std::vector<MetricRow>& rows,
                                      const std::vector<std::string>& names) {
  const std::map<std::string, std::vector<std::string>> kinds_by_key =
      KindsByKey(rows);
  std::vector<PlotSeries> out;
  for (const std::string& name : names) {
    std::string kind;
    std::string key = name;
    auto exact = kinds_by_key.find(name);
    if (exact != kinds_by_key.end()) {
      kind = exact->second.front();
    } else if (const size_t underscore = name.find('_');
               underscore != std::string::npos) {
      kind = name.substr(0, underscore);
      key = name.substr(underscore + 1);
    }
    std::map<int64_t, std::pair<int64_t, double>> by_step;  // step -> seq,v
    for (const MetricRow& row : rows) {
      if (row.point.kind() != kind) continue;
      auto it = row.point.values().find(key);
      if (it == row.point.values().end() || !std::isfinite(it->second)) {
        continue;
      }
      auto& slot = by_step[row.point.step()];
      if (row.seq >= slot.first) slot = {row.seq, it->second};
    }
    PlotSeries series;
    series.name = name;
    for (const auto& [step, seq_value] : by_step) {
      series.points.emplace_back(static_cast<double>(step), seq_value.second);
    }
    out.push_back(std::move(series));
  }
  return out;
}

std::vector<std::string> AvailableSeriesNames(
    const std::vector<MetricRow>& rows) {
  std::set<std::string> names;
  for (const auto& [key, kinds] : KindsByKey(rows)) {
    names.insert(key);
    for (size_t i = 1; i < kinds.size(); ++i) {
      names.insert(absl::StrCat(kinds[i], "_", key));
    }
  }
  return {names.begin(), names.end()};
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  const double raw = (hi - lo) / std::max(target, 1);
  int exponent = static_cast<int>(std::floor(std::log10(raw)));
  const double ratio = raw / std::pow(10.0, exponent);
  // The 1-2-5 step nearest to raw (thresholds at the geometric means).
  int mult = ratio >= std::sqrt(50.0)   ? 10
             : ratio >= std::sqrt(10.0) ? 5
             : ratio >= std::sqrt(2.0)  ? 2
                                        : 1;
  if (mult == 10) {
    mult = 1;
    ++exponent;
  }
  // Tick k is k * mult * 10^exponent; dividing by an exact power of ten for
  // negative exponents gives 0.3, not 0.30000000000000004.
  const double scale = std::pow(10.0, std::abs(exponent));
  auto value = [&](int64_t k) {
    return exponent >= 0 ? static_cast<double>(k * mult) * scale
                         : static_cast<double>(k * mult) / scale;
  };
  const double step = exponent >= 0 ? mult * scale : mult / scale;
  std::vector<double> ticks;
  for (int64_t k = static_cast<int64_t>(std::ceil(lo / step - 1e-9));
       value(k) <= hi + step * 1e-9; ++k) {
    ticks.push_back(value(k) == 0 ? 0.0 : value(k));  // no "-0"
  }
  return ticks;
}

std::vector<double> LogTicks(double lo, double hi) {
  std::vector<double> ticks;
  const int first = static_cast<int>(std::ceil(std::log10(lo) - 1e-9));
  const int last = static_cast<int>(std::floor(std::log10(hi) + 1e-9));
  const bool sparse = last - first + 1 < 3;
  for (int e = first - 1; e <= last; ++e) {
    const double power = std::pow(10.0, e);
    for (double mult : {1.0, 2.0, 5.0}) {
      if (mult != 1.0 && !sparse) continue;
      const double v = mult * power;
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
    }
  }
  if (ticks.size() < 2) return NiceTicks(lo, hi, 4);
  return ticks;
}

std::vector<std::pair<double, double>> Smooth(
    const std::vector<std::pair<double, double>>& points, double weight) {
  if (weight <= 0) return points;
  std::vector<std::pair<double, double>> out;
  out.reserve(points.size());
  double average = 0, debias = 1;
  for (const auto& [x, y] : points) {
    average = average * weight + (1 - weight) * y;
    debias *= weight;
    out.emplace_back(x, average / (1 - debias));
  }
  return out;
}

}  // namespace trainctl::client
