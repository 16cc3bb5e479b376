// SVG charts of metric history: series extraction and the drawn geometry,
// read back by parsing the SVG text.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/svg_plot.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;

MetricRow Row(int64_t seq, const std::string& kind, int64_t step,
              std::map<std::string, double> values) {
  MetricRow row;
  row.seq = seq;
  row.point.set_kind(kind);
  row.point.set_step(step);
  for (const auto& [k, v] : values) (*row.point.mutable_values())[k] = v;
  return row;
}

// The points of the polyline for `metric`, as (x, y) pixel pairs.
std::vector<std::pair<double, double>> PolylinePoints(const std::string& svg,
                                                      const std::string& metric) {
  std::smatch m;
  const std::regex re("<polyline class=\"series\" data-metric=\"" + metric +
                      "\"[^>]* points=\"([^\"]*)\"");
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

TEST(RenderSvgChartTest, OnePolylinePerSeriesWithMappedPoints) {
  std::vector<PlotSeries> series(2);
  series[0].name = "loss";
  for (int s = 0; s <= 40; s += 8) {
    series[0].points.emplace_back(s, 2.0 - s * 0.04);  // 2.0 down to 0.4
  }
  series[1].name = "eval_accuracy";
  series[1].points = {{20, 0.6}, {40, 0.8}};
  ChartOptions options;
  options.title = "job-1 <small>";
  const std::string svg = RenderSvgChart(series, options);

  auto loss = PolylinePoints(svg, "loss");
  ASSERT_EQ(loss.size(), 6u);
  auto acc = PolylinePoints(svg, "eval_accuracy");
  ASSERT_EQ(acc.size(), 2u);
  // x grows with the step and spans the plot area; y is inverted (larger
  // values higher up) and the extremes sit inside the frame.
  for (size_t i = 1; i < loss.size(); ++i) {
    EXPECT_GT(loss[i].first, loss[i - 1].first);
    EXPECT_GT(loss[i].second, loss[i - 1].second);  // loss falls -> y grows
  }
  EXPECT_DOUBLE_EQ(loss.front().first, 70.0);           // left margin
  EXPECT_DOUBLE_EQ(loss.back().first, 800.0 - 170.0);   // right edge of plot
  EXPECT_GT(loss.front().second, 40.0);                 // below the top margin
  EXPECT_LT(loss.back().second, 450.0 - 50.0);          // above the x axis
  // Step 40 is at the same x in both series.
  EXPECT_DOUBLE_EQ(acc.back().first, loss.back().first);

  EXPECT_THAT(svg, HasSubstr("job-1 &lt;small&gt;"));
  EXPECT_THAT(svg, HasSubstr(">step</text>"));
  // Tick labels on both axes and a legend entry per series.
  EXPECT_THAT(svg, HasSubstr(">40</text>"));
  EXPECT_THAT(svg, HasSubstr(">2</text>"));
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  std::smatch m;
  std::string rest = svg;
  int legends = 0;
  while (std::regex_search(rest, m, std::regex("class=\"legend\""))) {
    ++legends;
    rest = m.suffix();
  }
  EXPECT_EQ(legends, 2);
}

TEST(RenderSvgChartTest, SinglePointAndFlatSeriesDoNotDivideByZero) {
  std::vector<PlotSeries> series(2);
  series[0].name = "flat";
  series[0].points = {{5, 1.0}};
  series[1].name = "empty";
  const std::string svg = RenderSvgChart(series, {});
  auto points = PolylinePoints(svg, "flat");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_TRUE(std::isfinite(points[0].first) && std::isfinite(points[0].second));
  EXPECT_THAT(svg, HasSubstr("<circle"));
  EXPECT_THAT(svg, ::testing::Not(HasSubstr("data-metric=\"empty\"")));
  EXPECT_EQ(RenderSvgChart({series[1]}, {}), "");
}

}  // namespace
}  // namespace trainctl::client
