#include "client/png_plot.h"

#include "absl/strings/str_cat.h"

#ifdef TRAINCTL_HAVE_CAIRO
#include <cairo.h>

#include <cmath>
#include <cstdio>
#include <memory>
#endif

namespace trainctl::client {

#ifdef TRAINCTL_HAVE_CAIRO
namespace {

struct Rgb {
  double r, g, b;
};

// "#0072B2" -> (0, 0.447, 0.698); black for anything else.
Rgb ParseColor(const std::string& hex) {
  unsigned value = 0;
  if (hex.size() != 7 || hex[0] != '#' ||
      std::sscanf(hex.c_str() + 1, "%6x", &value) != 1) {
    return {0, 0, 0};
  }
  return {((value >> 16) & 0xff) / 255.0, ((value >> 8) & 0xff) / 255.0,
          (value & 0xff) / 255.0};
}

class CairoCanvas : public ChartCanvas {
 public:
  explicit CairoCanvas(cairo_t* cr) : cr_(cr) {
    cairo_select_font_face(cr_, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_line_join(cr_, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr_, CAIRO_LINE_CAP_ROUND);
  }
  void FillRect(double x, double y, double w, double h, const std::string& color) override {
    Source(color, 1);
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
  }
  void Line(double x1, double y1, double x2, double y2, const std::string& color,
            double width) override {
    Source(color, 1);
    cairo_set_line_width(cr_, width);
    // Thin axis and grid lines on pixel centres stay crisp.
    const double offset = std::fmod(width, 2.0) == 1.0 ? 0.5 : 0;
    cairo_move_to(cr_, std::floor(x1) + offset, std::floor(y1) + offset);
    cairo_line_to(cr_, std::floor(x2) + offset, std::floor(y2) + offset);
    cairo_stroke(cr_);
  }
  void Polyline(const std::vector<std::pair<double, double>>& points,
                const std::string& color, double width, double opacity,
                const std::string& /*metric*/, const std::string& /*label*/) override {
    if (points.empty()) return;
    Source(color, opacity);
    cairo_set_line_width(cr_, width);
    cairo_move_to(cr_, points[0].first, points[0].second);
    for (size_t i = 1; i < points.size(); ++i) {
      cairo_line_to(cr_, points[i].first, points[i].second);
    }
    cairo_stroke(cr_);
  }
  void Dot(double x, double y, double radius, const std::string& color) override {
    Source(color, 1);
    cairo_arc(cr_, x, y, radius, 0, 2 * M_PI);
    cairo_fill(cr_);
  }
  void Text(double x, double y, const std::string& text, double size, Anchor anchor,
            const std::string& color, bool vertical) override {
    Source(color, 1);
    cairo_set_font_size(cr_, size);
    cairo_text_extents_t extents;
    cairo_text_extents(cr_, text.c_str(), &extents);
    const double shift = anchor == Anchor::kStart    ? 0
                         : anchor == Anchor::kMiddle ? extents.x_advance / 2
                                                     : extents.x_advance;
    cairo_save(cr_);
    cairo_translate(cr_, x, y);
    if (vertical) cairo_rotate(cr_, -M_PI / 2);
    cairo_move_to(cr_, -shift, 0);
    cairo_show_text(cr_, text.c_str());
    cairo_restore(cr_);
  }

 private:
  void Source(const std::string& color, double alpha) {
    const Rgb c = ParseColor(color);
    cairo_set_source_rgba(cr_, c.r, c.g, c.b, alpha);
  }
  cairo_t* cr_;
};

cairo_status_t AppendBytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace
#endif

absl::StatusOr<std::string> RenderPngChart(const std::vector<ChartPanel>& panels,
                                           const ChartOptions& options, int* dropped) {
  if (!HasPoints(panels)) {
    return absl::InvalidArgumentError("no series has a point to draw");
  }
#ifdef TRAINCTL_HAVE_CAIRO
  const auto [width, height] = ChartSize(panels, options);
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height),
      cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()),
                                                         cairo_destroy);
  CairoCanvas canvas(cr.get());
  DrawChart(panels, options, canvas, dropped);
  cairo_surface_flush(surface.get());
  if (cairo_status(cr.get()) != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("cairo: ", cairo_status_to_string(cairo_status(cr.get()))));
  }
  std::string png;
  const cairo_status_t written =
      cairo_surface_write_to_png_stream(surface.get(), AppendBytes, &png);
  if (written != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("cairo: cannot encode the PNG: ", cairo_status_to_string(written)));
  }
  return png;
#else
  (void)options;
  (void)dropped;
  return absl::UnimplementedError(
      "this trainctl was built without cairo, so it draws SVG only: use -o FILE.svg "
      "(or install libcairo2-dev and build again)");
#endif
}

}  // namespace trainctl::client
