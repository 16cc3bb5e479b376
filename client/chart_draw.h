#pragma once

// `trainctl plot`'s charts, drawn once for every output format: the layout
// and drawing go through ChartCanvas, which the SVG writer (svg_plot.h) and
// the cairo PNG writer (png_plot.h) implement.

#include <string>
#include <utility>
#include <vector>

#include "client/chart_data.h"

namespace trainctl::client {

// One metric: its own panel with its own y axis, one line per job.
struct ChartPanel {
  std::string metric;
  std::vector<PlotSeries> series;  // series[i] is job i's (maybe no points)
};

struct ChartOptions {
  int width = 960;          // the whole image
  int panel_height = 280;   // each panel's
  std::string title;
  std::string x_label = "step";
  bool log_y = false;       // log10 value axes (values <= 0 are left out)
  double smoothing = 0;     // Smooth()'s weight; the raw line stays, faint
};

enum class Anchor { kStart, kMiddle, kEnd };

// What a chart is drawn with. Coordinates in pixels from the top left.
class ChartCanvas {
 public:
  virtual ~ChartCanvas() = default;
  // Around each panel's drawing (the SVG groups it); nothing by default.
  virtual void BeginPanel(const std::string& /*metric*/) {}
  virtual void EndPanel() {}
  virtual void FillRect(double x, double y, double w, double h,
                        const std::string& color) = 0;
  virtual void Line(double x1, double y1, double x2, double y2,
                    const std::string& color, double width) = 0;
  // A data line: `metric` and `label` say which (the SVG keeps them as
  // attributes); `opacity` < 1 for the raw line under a smoothed one.
  virtual void Polyline(const std::vector<std::pair<double, double>>& points,
                        const std::string& color, double width, double opacity,
                        const std::string& metric, const std::string& label) = 0;
  virtual void Dot(double x, double y, double radius, const std::string& color) = 0;
  // Text with its baseline at y; `vertical` turns it to read upwards.
  virtual void Text(double x, double y, const std::string& text, double size,
                    Anchor anchor, const std::string& color, bool vertical = false) = 0;
};

// The image's width and height: two columns of panels when there are
// several, a legend row when they have several series.
std::pair<int, int> ChartSize(const std::vector<ChartPanel>& panels,
                              const ChartOptions& options);

// Some series of some panel has a point to draw.
bool HasPoints(const std::vector<ChartPanel>& panels);

// Draws the title, a legend of the series labels when there are several
// (job i has colour i in every panel), and each panel: its metric, a light
// grid, axes with ticks, every series as a line (a dot for a lone point;
// with smoothing the raw line faint and the smoothed one over it). A panel
// with no points says so. `dropped`, if given, counts the values a log
// axis could not show.
void DrawChart(const std::vector<ChartPanel>& panels, const ChartOptions& options,
               ChartCanvas& canvas, int* dropped = nullptr);

}  // namespace trainctl::client
