#include "client/chart_draw.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace trainctl::client {
namespace {

constexpr double kTitleHeight = 34;
constexpr double kLegendHeight = 22;
// Inside each panel: room for its title, tick labels and the x label.
constexpr double kLeft = 70, kRight = 20, kTop = 30, kBottom = 44;
constexpr char kInk[] = "#333333";
constexpr char kGrid[] = "#e3e3e3";
constexpr char kMuted[] = "#777777";

bool Labelled(const std::vector<ChartPanel>& panels) {
  for (const ChartPanel& p : panels) {
    if (p.series.size() > 1) return true;
  }
  return false;
}

double Header(const std::vector<ChartPanel>& panels) {
  return kTitleHeight + (Labelled(panels) ? kLegendHeight : 0);
}

// Widens a degenerate range so the mapping never divides by zero and a lone
// point sits inside the frame, not on its edge.
void Widen(double* lo, double* hi, bool log) {
  if (*hi > *lo) return;
  if (log) {
    *lo /= 2;
    *hi *= 2;
    return;
  }
  const double pad = *lo == 0 ? 1 : std::fabs(*lo) * 0.1;
  *lo -= pad;
  *hi += pad;
}

struct Frame {
  double x, y, w, h;  // the plotting area
  double x_lo, x_hi, y_lo, y_hi;  // data range (y as log10 on a log axis)
  bool log;
  double X(double v) const { return x + (v - x_lo) / (x_hi - x_lo) * w; }
  double Y(double v) const {
    const double t = log ? std::log10(v) : v;
    return y + (y_hi - t) / (y_hi - y_lo) * h;
  }
};

void DrawPanel(const ChartPanel& panel, const ChartOptions& options, double px,
               double py, double pw, double ph, ChartCanvas& canvas, int* dropped) {
  const bool log = options.log_y;
  // The points each series can show (a log axis cannot show values <= 0).
  std::vector<std::vector<std::pair<double, double>>> shown;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const PlotSeries& s : panel.series) {
    std::vector<std::pair<double, double>> points;
    for (const auto& [x, y] : s.points) {
      if (log && !(y > 0)) {
        if (dropped != nullptr) ++*dropped;
        continue;
      }
      points.emplace_back(x, y);
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
    shown.push_back(std::move(points));
  }
  canvas.Text(px + kLeft, py + 20, panel.metric + (log ? " (log scale)" : ""), 14,
              Anchor::kStart, kInk);
  Frame f{px + kLeft, py + kTop, pw - kLeft - kRight, ph - kTop - kBottom,
          0, 1, 0, 1, log};
  if (!std::isfinite(x_lo)) {
    canvas.Text(f.x + f.w / 2, f.y + f.h / 2, "no points", 12, Anchor::kMiddle, kMuted);
    return;
  }
  Widen(&x_lo, &x_hi, false);
  Widen(&y_lo, &y_hi, log);
  f.x_lo = x_lo;
  f.x_hi = x_hi;
  std::vector<double> y_ticks;
  if (log) {
    y_ticks = LogTicks(y_lo, y_hi);
    f.y_lo = std::log10(y_lo);
    f.y_hi = std::log10(y_hi);
    const double pad = (f.y_hi - f.y_lo) * 0.05;
    f.y_lo -= pad;
    f.y_hi += pad;
  } else {
    const double pad = (y_hi - y_lo) * 0.05;  // lines clear of the frame
    f.y_lo = y_lo - pad;
    f.y_hi = y_hi + pad;
    y_ticks = NiceTicks(f.y_lo, f.y_hi, 5);
  }
  for (double t : y_ticks) {
    const double y = f.Y(t);
    canvas.Line(f.x, y, f.x + f.w, y, kGrid, 1);
    canvas.Line(f.x - 4, y, f.x, y, kInk, 1);
    canvas.Text(f.x - 7, y + 4, TickLabel(t), 11, Anchor::kEnd, kInk);
  }
  // Steps are whole: no more ticks than there are steps in the range.
  const int x_ticks = static_cast<int>(
      std::max(1.0, std::min(f.w / 90, std::floor(f.x_hi - f.x_lo))));
  for (double t : NiceTicks(f.x_lo, f.x_hi, x_ticks)) {
    const double x = f.X(t);
    canvas.Line(x, f.y + f.h, x, f.y + f.h + 4, kInk, 1);
    canvas.Text(x, f.y + f.h + 17, TickLabel(t), 11, Anchor::kMiddle, kInk);
  }
  canvas.Line(f.x, f.y + f.h, f.x + f.w, f.y + f.h, kInk, 1);
  canvas.Line(f.x, f.y, f.x, f.y + f.h, kInk, 1);
  canvas.Text(f.x + f.w / 2, f.y + f.h + 34, options.x_label, 12, Anchor::kMiddle, kInk);

  for (size_t i = 0; i < shown.size(); ++i) {
    const std::vector<std::pair<double, double>>& points = shown[i];
    if (points.empty()) continue;
    const std::string color = SeriesColor(static_cast<int>(i));
    const PlotSeries& s = panel.series[i];
    auto pixels = [&f](const std::vector<std::pair<double, double>>& data) {
      std::vector<std::pair<double, double>> out;
      for (const auto& [x, y] : data) out.emplace_back(f.X(x), f.Y(y));
      return out;
    };
    if (points.size() == 1) {  // the line (for the SVG's data) and a visible dot
      canvas.Polyline(pixels(points), color, 1.6, 1, s.name, s.label);
      canvas.Dot(f.X(points[0].first), f.Y(points[0].second), 3.5, color);
      continue;
    }
    if (options.smoothing > 0) {
      canvas.Polyline(pixels(points), color, 1.2, 0.3, s.name, s.label);
      canvas.Polyline(pixels(Smooth(points, options.smoothing)), color, 2, 1,
                      s.name, s.label);
    } else {
      canvas.Polyline(pixels(points), color, 1.6, 1, s.name, s.label);
    }
  }
}

}  // namespace

std::pair<int, int> ChartSize(const std::vector<ChartPanel>& panels,
                              const ChartOptions& options) {
  const size_t columns = panels.size() > 1 ? 2 : 1;
  const size_t rows = (panels.size() + columns - 1) / columns;
  return {options.width, static_cast<int>(Header(panels) +
                                          static_cast<double>(rows) * options.panel_height)};
}

bool HasPoints(const std::vector<ChartPanel>& panels) {
  for (const ChartPanel& p : panels) {
    for (const PlotSeries& s : p.series) {
      if (!s.points.empty()) return true;
    }
  }
  return false;
}

void DrawChart(const std::vector<ChartPanel>& panels, const ChartOptions& options,
               ChartCanvas& canvas, int* dropped) {
  const auto [width, height] = ChartSize(panels, options);
  canvas.FillRect(0, 0, width, height, "#ffffff");
  canvas.Text(width / 2.0, 23, options.title, 16, Anchor::kMiddle, kInk);
  if (Labelled(panels)) {
    // Every panel lists its series in the same (job) order.
    double x = 20;
    for (size_t i = 0; i < panels.front().series.size(); ++i) {
      const std::string color = SeriesColor(static_cast<int>(i));
      canvas.Line(x, kTitleHeight + 7, x + 22, kTitleHeight + 7, color, 3);
      const std::string& label = panels.front().series[i].label;
      canvas.Text(x + 28, kTitleHeight + 11, label, 12, Anchor::kStart, kInk);
      x += 28 + 7.5 * static_cast<double>(label.size()) + 24;
    }
  }
  const size_t columns = panels.size() > 1 ? 2 : 1;
  const double panel_w = static_cast<double>(width) / static_cast<double>(columns);
  for (size_t i = 0; i < panels.size(); ++i) {
    const double px = static_cast<double>(i % columns) * panel_w;
    const double py = Header(panels) + static_cast<double>(i / columns) * options.panel_height;
    canvas.BeginPanel(panels[i].metric);
    DrawPanel(panels[i], options, px, py, panel_w, options.panel_height, canvas, dropped);
    canvas.EndPanel();
  }
}

}  // namespace trainctl::client
