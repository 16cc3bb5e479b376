// Charts of metric history: series extraction, ticks, smoothing, and the
// drawn geometry (panels, overlaid jobs, log scale) read back from the SVG.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/chart_data.h"
#include "client/svg_plot.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

MetricRow Row(int64_t seq, const std::string& kind, int64_t step,
              std::map<std::string, double> values) {
  MetricRow row;
  row.seq = seq;
  row.point.set_kind(kind);
  row.point.set_step(step);
  for (const auto& [k, v] : values) (*row.point.mutable_values())[k] = v;
  return row;
}

// The points of the `cls` polyline of `metric` and `label`, as (x, y).
std::vector<std::pair<double, double>> PolylinePoints(const std::string& svg,
                                                      const std::string& metric,
                                                      const std::string& label,
                                                      const std::string& cls = "series") {
  std::smatch m;
  const std::regex re("<polyline class=\"" + cls + "\" data-metric=\"" + metric +
                      "\" data-series=\"" + label + "\"[^>]* points=\"([^\"]*)\"");
  if (!std::regex_search(svg, m, re)) return {};
  std::vector<std::pair<double, double>> out;
  for (absl::string_view pair : absl::StrSplit(m[1].str(), ' ')) {
    std::vector<absl::string_view> xy = absl::StrSplit(pair, ',');
    double x = 0, y = 0;
    EXPECT_EQ(xy.size(), 2u);
    EXPECT_TRUE(absl::SimpleAtod(xy[0], &x) && absl::SimpleAtod(xy[1], &y));
    out.emplace_back(x, y);
  }
  return out;
}

TEST(ExtractSeriesTest, ResolvesKindsAndKeepsTheLastPointOfAStep) {
  const std::vector<MetricRow> rows = {
      Row(1, "plan", 0, {{"join_ms", 5}}),
      Row(2, "train", 8, {{"loss", 2.0}}),
      Row(3, "train", 16, {{"loss", 1.5}}),
      Row(4, "eval", 16, {{"accuracy", 0.5}, {"loss", 1.4}}),
      Row(7, "eval", 16, {{"eval_accuracy", 0.25}}),
      // Restarted from a checkpoint at step 8: step 16 is trained again.
      Row(5, "train", 16, {{"loss", 1.2}}),
      Row(6, "train", 24, {{"loss", NAN}}),
  };
  std::vector<PlotSeries> series =
      ExtractSeries(rows, {"loss", "eval_accuracy", "train_loss", "nope",
                           "accuracy", "eval_loss", "join_ms"});
  ASSERT_EQ(series.size(), 7u);
  EXPECT_EQ(series[0].points,
            (std::vector<std::pair<double, double>>{{8, 2.0}, {16, 1.2}}));
  // An exact key wins over the KIND_KEY reading.
  EXPECT_EQ(series[1].points,
            (std::vector<std::pair<double, double>>{{16, 0.25}}));
  EXPECT_EQ(series[2].points, series[0].points);
  EXPECT_TRUE(series[3].points.empty());
  EXPECT_EQ(series[4].points,
            (std::vector<std::pair<double, double>>{{16, 0.5}}));
  // "loss" is a train key, so eval's loss is reached as eval_loss.
  EXPECT_EQ(series[5].points,
            (std::vector<std::pair<double, double>>{{16, 1.4}}));
  EXPECT_EQ(series[6].points,
            (std::vector<std::pair<double, double>>{{0, 5}}));
  EXPECT_EQ(AvailableSeriesNames(rows),
            (std::vector<std::string>{"accuracy", "eval_accuracy", "eval_loss",
                                      "join_ms", "loss"}));
}

TEST(NiceTicksTest, RoundValuesCoveringTheRange) {
  EXPECT_EQ(NiceTicks(0, 100, 5),
            (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(NiceTicks(0.13, 0.61, 5),
            (std::vector<double>{0.2, 0.3, 0.4, 0.5, 0.6}));
  std::vector<double> ticks = NiceTicks(-3, 7, 4);
  EXPECT_EQ(ticks, (std::vector<double>{-2, 0, 2, 4, 6}));
}

TEST(LogTicksTest, PowersOfTenAndTheirMultiplesWhenFew) {
  EXPECT_EQ(LogTicks(0.001, 10), (std::vector<double>{0.001, 0.01, 0.1, 1, 10}));
  EXPECT_EQ(LogTicks(0.15, 3), (std::vector<double>{0.2, 0.5, 1, 2}));
  EXPECT_EQ(LogTicks(0.3, 0.45).size() >= 2, true);  // no power inside: linear
}

TEST(SmoothTest, TensorBoardsDebiasedMovingAverage) {
  const std::vector<std::pair<double, double>> raw = {{1, 10}, {2, 0}, {3, 10}};
  EXPECT_EQ(Smooth(raw, 0), raw);
  const auto smooth = Smooth(raw, 0.5);
  ASSERT_EQ(smooth.size(), 3u);
  EXPECT_DOUBLE_EQ(smooth[0].second, 10);  // debiased: the first point itself
  EXPECT_DOUBLE_EQ(smooth[1].second, (2.5 + 0) / 0.75 * 1.0);  // (0.5*5 + 0)/(1-0.25)
  EXPECT_DOUBLE_EQ(smooth[2].second, (1.25 + 5) / 0.875);
  EXPECT_EQ(smooth[2].first, 3);
}

PlotSeries Series(const std::string& metric, const std::string& label,
                  std::vector<std::pair<double, double>> points) {
  PlotSeries s;
  s.name = metric;
  s.label = label;
  s.points = std::move(points);
  return s;
}

// The <g class="panel"> of `metric`.
std::string Panel(const std::string& svg, const std::string& metric) {
  const size_t start = svg.find("<g class=\"panel\" data-metric=\"" + metric + "\">");
  if (start == std::string::npos) return "";
  return svg.substr(start, svg.find("</g>", start) - start);
}

// A panel per metric with its own y axis; a line per job in each, the
// jobs' colours the same in every panel and named in one legend.
TEST(RenderSvgChartTest, APanelPerMetricAndALinePerJob) {
  std::vector<ChartPanel> panels(2);
  panels[0].metric = "loss";
  panels[1].metric = "lr";
  std::vector<std::pair<double, double>> loss, lr;
  for (int s = 0; s <= 40; s += 8) {
    loss.emplace_back(s, 2.0 - s * 0.04);  // 2.0 down to 0.4
    lr.emplace_back(s, 0.001);             // flat, and tiny next to the loss
  }
  panels[0].series = {Series("loss", "job-1 mlp", loss),
                      Series("loss", "job-2 <cnn>", {{0, 2.2}, {40, 0.3}})};
  panels[1].series = {Series("lr", "job-1 mlp", lr), Series("lr", "job-2 <cnn>", {})};
  ChartOptions options;
  options.title = "job-1 vs job-2";
  const std::string svg = RenderSvgChart(panels, options);

  const std::string loss_panel = Panel(svg, "loss"), lr_panel = Panel(svg, "lr");
  ASSERT_FALSE(loss_panel.empty()) << svg;
  ASSERT_FALSE(lr_panel.empty()) << svg;
  const auto job1 = PolylinePoints(loss_panel, "loss", "job-1 mlp");
  const auto job2 = PolylinePoints(loss_panel, "loss", "job-2 &lt;cnn&gt;");
  ASSERT_EQ(job1.size(), 6u);
  ASSERT_EQ(job2.size(), 2u);
  for (size_t i = 1; i < job1.size(); ++i) {
    EXPECT_GT(job1[i].first, job1[i - 1].first);    // x grows with the step
    EXPECT_GT(job1[i].second, job1[i - 1].second);  // loss falls: y grows down
  }
  EXPECT_DOUBLE_EQ(job2.back().first, job1.back().first);  // step 40 alike
  // Two panels side by side: lr's starts right of loss's.
  const auto lr_line = PolylinePoints(lr_panel, "lr", "job-1 mlp");
  ASSERT_EQ(lr_line.size(), 6u);
  EXPECT_GT(lr_line.front().first, job1.back().first);
  // Its own axis: a flat lr sits mid-panel, not on a loss axis's floor, and
  // its ticks are the lr's own.
  EXPECT_THAT(lr_panel, HasSubstr(">0.001</text>"));
  EXPECT_THAT(loss_panel, Not(HasSubstr(">0.001</text>")));
  // Job i has colour i in both panels; the legend names both jobs.
  EXPECT_THAT(loss_panel, HasSubstr("data-series=\"job-1 mlp\" fill=\"none\" stroke=\"#0072B2\""));
  EXPECT_THAT(lr_panel, HasSubstr("data-series=\"job-1 mlp\" fill=\"none\" stroke=\"#0072B2\""));
  EXPECT_THAT(loss_panel, HasSubstr("stroke=\"#D55E00\""));
  EXPECT_THAT(svg, HasSubstr(">job-2 &lt;cnn&gt;</text>"));
  EXPECT_THAT(svg, HasSubstr(">job-1 vs job-2</text>"));
  EXPECT_THAT(loss_panel, HasSubstr(">step</text>"));
}

TEST(RenderSvgChartTest, LogScaleAndSmoothing) {
  std::vector<ChartPanel> panels(1);
  panels[0].metric = "loss";
  panels[0].series = {Series("loss", "job-1", {{0, 10}, {10, 1}, {20, 0.1}, {30, 0}})};
  ChartOptions options;
  options.log_y = true;
  int dropped = 0;
  std::string svg = RenderSvgChart(panels, options, &dropped);
  EXPECT_EQ(dropped, 1);  // the 0
  const auto points = PolylinePoints(svg, "loss", "job-1");
  ASSERT_EQ(points.size(), 3u);
  // Equal ratios, equal distances.
  EXPECT_NEAR(points[1].second - points[0].second, points[2].second - points[1].second, 0.15);
  EXPECT_THAT(svg, HasSubstr(">loss (log scale)</text>"));
  EXPECT_THAT(svg, HasSubstr(">0.1</text>"));
  EXPECT_THAT(svg, HasSubstr(">10</text>"));

  options.log_y = false;
  options.smoothing = 0.6;
  svg = RenderSvgChart(panels, options);
  EXPECT_THAT(svg, HasSubstr("<polyline class=\"raw\" data-metric=\"loss\""));
  EXPECT_THAT(svg, HasSubstr("stroke-opacity=\"0.3\""));
  const auto smooth = PolylinePoints(svg, "loss", "job-1");
  ASSERT_EQ(smooth.size(), 4u);
  // The smoothed line's last point is above the raw 0 (it lags the drop).
  const auto raw = PolylinePoints(svg, "loss", "job-1", "raw");
  ASSERT_EQ(raw.size(), 4u);
  EXPECT_LT(smooth.back().second, raw.back().second);
}

TEST(RenderSvgChartTest, ALonePointIsADotInsideTheFrameAndNoPointsIsEmpty) {
  std::vector<ChartPanel> panels(2);
  panels[0].metric = "eval_accuracy";
  panels[0].series = {Series("eval_accuracy", "job-1", {{40, 0.8}})};
  panels[1].metric = "empty";
  panels[1].series = {Series("empty", "job-1", {})};
  const std::string svg = RenderSvgChart(panels, {});
  const std::string dot = Panel(svg, "eval_accuracy");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dot, m, std::regex("<circle cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"")));
  const double cx = std::stod(m[1]), cy = std::stod(m[2]);
  EXPECT_GT(cx, 70 + 20);   // not on the y axis
  EXPECT_LT(cx, 480 - 40);  // nor the panel's right edge
  EXPECT_GT(cy, 40);
  // One step label under it, not the same one twice.
  EXPECT_EQ(std::regex_search(dot, std::regex(">40</text>[^]*>40</text>")), false);
  EXPECT_THAT(Panel(svg, "empty"), HasSubstr(">no points</text>"));
  panels.erase(panels.begin());
  EXPECT_EQ(RenderSvgChart(panels, {}), "");
}

}  // namespace
}  // namespace trainctl::client
