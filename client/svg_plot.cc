#include "client/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace trainctl::client {
namespace {

// Colour-blind-friendly palette (Okabe-Ito), cycled.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73",
                                   "#CC79A7", "#E69F00", "#56B4E9",
                                   "#F0E442", "#000000"};

std::string Xml(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"},
                                    {"<", "&lt;"},
                                    {">", "&gt;"},
                                    {"\"", "&quot;"}});
}

// Widens a degenerate range so the mapping below never divides by zero.
void Widen(double* lo, double* hi) {
  if (*hi > *lo) return;
  const double pad = *lo == 0 ? 1 : std::fabs(*lo) * 0.1;
  *lo -= pad;
  *hi += pad;
}

}  // namespace

std::string TickLabel(double v) {
  if (v == 0) return "0";
  return absl::StrFormat("%.6g", v);
}

const char* SeriesColor(int index) {
  return kColors[index % static_cast<int>(std::size(kColors))];
}

bool LayoutChart(const std::vector<PlotSeries>& series,
                 const ChartOptions& options, ChartLayout* layout) {
  ChartLayout& l = *layout;
  l.plot_w = options.width - l.left - l.right;
  l.plot_h = options.height - l.top - l.bottom;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const PlotSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  }
  if (!std::isfinite(x_lo)) return false;
  Widen(&x_lo, &x_hi);
  Widen(&y_lo, &y_hi);
  // Some headroom so lines do not run along the frame.
  const double y_pad = (y_hi - y_lo) * 0.05;
  l.x_lo = x_lo;
  l.x_hi = x_hi;
  l.y_lo = y_lo - y_pad;
  l.y_hi = y_hi + y_pad;
  l.x_ticks = NiceTicks(l.x_lo, l.x_hi, 8);
  l.y_ticks = NiceTicks(l.y_lo, l.y_hi, 6);
  return true;
}

namespace {

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
      if (row.point.kind() == "train") {
        list.insert(list.begin(), "train");
      } else {
        list.push_back(row.point.kind());
      }
    }
  }
  return kinds;
}

}  // namespace

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

std::string RenderSvgChart(const std::vector<PlotSeries>& series,
                           const ChartOptions& options) {
  ChartLayout layout;
  if (!LayoutChart(series, options, &layout)) return "";  // callers check
  const double left = layout.left, top = layout.top;
  const double plot_w = layout.plot_w, plot_h = layout.plot_h;
  auto px = [&layout](double x) { return layout.X(x); };
  auto py = [&layout](double y) { return layout.Y(y); };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      options.width, options.height, options.width, options.height);
  absl::StrAppendFormat(&svg,
                        "<text class=\"title\" x=\"%.1f\" y=\"24\" "
                        "text-anchor=\"middle\" font-size=\"15\">%s</text>\n",
                        left + plot_w / 2, Xml(options.title));
  // Axes: the frame's left and bottom edges.
  absl::StrAppendFormat(&svg,
                        "<g class=\"axes\" stroke=\"#333\">"
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                        "</g>\n",
                        left, top + plot_h, left + plot_w, top + plot_h, left,
                        top, left, top + plot_h);
  svg += "<g class=\"x-ticks\">\n";
  for (double t : layout.x_ticks) {
    const double x = px(t);
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
        x, top + plot_h, x, top + plot_h + 5, x, top + plot_h + 18,
        TickLabel(t));
  }
  svg += "</g>\n<g class=\"y-ticks\">\n";
  for (double t : layout.y_ticks) {
    const double y = py(t);
    // A light grid line helps read values off the chart.
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
        left, y, left + plot_w, y, left - 5, y, left, y, left - 8, y + 4,
        TickLabel(t));
  }
  svg += "</g>\n";
  absl::StrAppendFormat(&svg,
                        "<text class=\"x-label\" x=\"%.1f\" y=\"%.1f\" "
                        "text-anchor=\"middle\">%s</text>\n",
                        left + plot_w / 2, top + plot_h + 38,
                        Xml(options.x_label));
  absl::StrAppendFormat(&svg,
                        "<text class=\"y-label\" transform=\"translate(16 "
                        "%.1f) rotate(-90)\" text-anchor=\"middle\">value"
                        "</text>\n",
                        top + plot_h / 2);

  int index = 0;
  for (const PlotSeries& s : series) {
    if (s.points.empty()) continue;
    const char* color = SeriesColor(index);
    std::string points;
    for (const auto& [x, y] : s.points) {
      absl::StrAppendFormat(&points, "%s%.1f,%.1f", points.empty() ? "" : " ",
                            px(x), py(y));
    }
    absl::StrAppendFormat(&svg,
                          "<polyline class=\"series\" data-metric=\"%s\" "
                          "fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                          "points=\"%s\"/>\n",
                          Xml(s.name), color, points);
    if (s.points.size() == 1) {
      absl::StrAppendFormat(&svg,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
                            "fill=\"%s\"/>\n",
                            px(s.points[0].first), py(s.points[0].second),
                            color);
    }
    const double ly = top + 10 + index * 18;
    const double lx = left + plot_w + 15;
    absl::StrAppendFormat(&svg,
                          "<g class=\"legend\"><line x1=\"%.1f\" y1=\"%.1f\" "
                          "x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\">%s"
                          "</text></g>\n",
                          lx, ly, lx + 20, ly, color, lx + 26, ly + 4,
                          Xml(s.name));
    ++index;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace trainctl::client
