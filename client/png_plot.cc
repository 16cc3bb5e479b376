#include "client/png_plot.h"

#include <zlib.h>

#include <cmath>

#include "absl/strings/str_cat.h"

namespace trainctl::client {
namespace {

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kInk{0x33, 0x33, 0x33};
constexpr Rgb kGrid{0xdd, 0xdd, 0xdd};

void AppendU32(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

// Length, type, data, CRC-32 of type and data.
void AppendChunk(std::string* out, const char type[5], const std::string& data) {
  AppendU32(out, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out->append(body);
  AppendU32(out, static_cast<uint32_t>(
                     crc32(0L, reinterpret_cast<const Bytef*>(body.data()),
                           static_cast<uInt>(body.size()))));
}

int Round(double v) { return static_cast<int>(std::lround(v)); }

}  // namespace

absl::StatusOr<std::string> EncodePng(const Canvas& canvas) {
  const int w = canvas.width(), h = canvas.height();
  std::string raw;
  raw.reserve(static_cast<size_t>(h) * (1 + 3 * w));
  const std::vector<uint8_t>& px = canvas.pixels();
  for (int y = 0; y < h; ++y) {
    raw.push_back('\0');  // filter type 0 (None)
    raw.append(reinterpret_cast<const char*>(px.data()) +
                   static_cast<size_t>(y) * w * 3,
               static_cast<size_t>(w) * 3);
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string compressed(size, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(compressed.data()), &size,
                           reinterpret_cast<const Bytef*>(raw.data()),
                           static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION);
  if (rc != Z_OK) {
    return absl::InternalError(absl::StrCat("zlib compress2 failed: ", rc));
  }
  compressed.resize(size);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  AppendU32(&ihdr, static_cast<uint32_t>(w));
  AppendU32(&ihdr, static_cast<uint32_t>(h));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, no interlace
  AppendChunk(&png, "IHDR", ihdr);
  AppendChunk(&png, "IDAT", compressed);
  AppendChunk(&png, "IEND", "");
  return png;
}

Canvas RasterizeChart(const std::vector<PlotSeries>& series,
                      const ChartOptions& options) {
  ChartLayout l;
  if (!LayoutChart(series, options, &l)) return Canvas(0, 0, kWhite);
  Canvas canvas(options.width, options.height, kWhite);
  const double bottom = l.top + l.plot_h;
  const double right = l.left + l.plot_w;
  const int glyph = Canvas::kGlyphHeight;

  for (double t : l.y_ticks) {
    const double y = l.Y(t);
    canvas.Line(l.left, y, right, y, kGrid);
    canvas.Line(l.left - 5, y, l.left, y, kInk);
    const std::string label = TickLabel(t);
    canvas.Text(Round(l.left - 8) - Canvas::TextWidth(label),
                Round(y) - glyph / 2, label, kInk);
  }
  for (double t : l.x_ticks) {
    const double x = l.X(t);
    canvas.Line(x, bottom, x, bottom + 5, kInk);
    const std::string label = TickLabel(t);
    canvas.Text(Round(x) - Canvas::TextWidth(label) / 2, Round(bottom + 9),
                label, kInk);
  }
  canvas.Line(l.left, bottom, right, bottom, kInk);
  canvas.Line(l.left, l.top, l.left, bottom, kInk);
  canvas.Text(Round(l.left + l.plot_w / 2) - Canvas::TextWidth(options.x_label) / 2,
              Round(bottom + 28), options.x_label, kInk);
  canvas.Text(Round(l.left + l.plot_w / 2) - Canvas::TextWidth(options.title, 2) / 2,
              12, options.title, kInk, 2);

  int index = 0;
  for (const PlotSeries& s : series) {
    if (s.points.empty()) continue;
    const Rgb color = ParseHexColor(SeriesColor(index));
    for (size_t i = 1; i < s.points.size(); ++i) {
      canvas.Line(l.X(s.points[i - 1].first), l.Y(s.points[i - 1].second),
                  l.X(s.points[i].first), l.Y(s.points[i].second), color, 2);
    }
    if (s.points.size() == 1) {
      canvas.Disc(l.X(s.points[0].first), l.Y(s.points[0].second), 3, color);
    }
    const double ly = l.top + 10 + index * 18;
    const double lx = right + 15;
    canvas.Line(lx, ly, lx + 20, ly, color, 2);
    canvas.Text(Round(lx + 26), Round(ly) - glyph / 2, s.name, kInk);
    ++index;
  }
  return canvas;
}

absl::StatusOr<std::string> RenderPngChart(const std::vector<PlotSeries>& series,
                                           const ChartOptions& options) {
  Canvas canvas = RasterizeChart(series, options);
  if (canvas.width() == 0) {
    return absl::InvalidArgumentError("no series has points to draw");
  }
  return EncodePng(canvas);
}

}  // namespace trainctl::client
