#include "client/svg_plot.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace trainctl::client {
namespace {

std::string Xml(const std::string& text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

class SvgCanvas : public ChartCanvas {
 public:
  void FillRect(double x, double y, double w, double h, const std::string& color) override {
    absl::StrAppendFormat(&body_,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                          "fill=\"%s\"/>\n",
                          x, y, w, h, color);
  }
  void Line(double x1, double y1, double x2, double y2, const std::string& color,
            double width) override {
    absl::StrAppendFormat(&body_,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                          "stroke=\"%s\" stroke-width=\"%g\"/>\n",
                          x1, y1, x2, y2, color, width);
  }
  void Polyline(const std::vector<std::pair<double, double>>& points,
                const std::string& color, double width, double opacity,
                const std::string& metric, const std::string& label) override {
    std::string coords;
    for (const auto& [x, y] : points) {
      absl::StrAppendFormat(&coords, "%s%.1f,%.1f", coords.empty() ? "" : " ", x, y);
    }
    absl::StrAppendFormat(&body_,
                          "<polyline class=\"%s\" data-metric=\"%s\" data-series=\"%s\" "
                          "fill=\"none\" stroke=\"%s\" stroke-width=\"%g\" "
                          "stroke-opacity=\"%g\" stroke-linejoin=\"round\" points=\"%s\"/>\n",
                          opacity < 1 ? "raw" : "series", Xml(metric), Xml(label), color,
                          width, opacity, coords);
  }
  void Dot(double x, double y, double radius, const std::string& color) override {
    absl::StrAppendFormat(&body_,
                          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%g\" fill=\"%s\"/>\n", x, y,
                          radius, color);
  }
  void Text(double x, double y, const std::string& text, double size, Anchor anchor,
            const std::string& color, bool vertical) override {
    const char* a = anchor == Anchor::kStart ? "start"
                    : anchor == Anchor::kMiddle ? "middle"
                                                : "end";
    absl::StrAppendFormat(&body_,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\" text-anchor=\"%s\" "
                          "fill=\"%s\"%s>%s</text>\n",
                          x, y, size, a, color,
                          vertical ? absl::StrFormat(" transform=\"rotate(-90 %.1f %.1f)\"", x, y)
                                   : "",
                          Xml(text));
  }
  void BeginPanel(const std::string& metric) override {
    absl::StrAppendFormat(&body_, "<g class=\"panel\" data-metric=\"%s\">\n", Xml(metric));
  }
  void EndPanel() override { body_ += "</g>\n"; }
  std::string& body() { return body_; }

 private:
  std::string body_;
};

}  // namespace

std::string RenderSvgChart(const std::vector<ChartPanel>& panels,
                           const ChartOptions& options, int* dropped) {
  if (!HasPoints(panels)) return "";
  const auto [width, height] = ChartSize(panels, options);
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n",
      width, height, width, height);
  SvgCanvas canvas;
  DrawChart(panels, options, canvas, dropped);
  svg += canvas.body();
  svg += "</svg>\n";
  return svg;
}

}  // namespace trainctl::client
