// `plot -o FILE.png`: the file is a well-formed PNG (signature, IHDR, CRCs,
// zlib stream, filter bytes) and its pixels show the series where the data
// puts them, with the bitmap font's labels and a legend.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "client/png_plot.h"

namespace trainctl::client {
namespace {

uint32_t U32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

// A PNG read back by the rules of the format, independently of the writer.
struct DecodedPng {
  uint32_t width = 0, height = 0;
  std::vector<std::string> chunk_types;
  std::vector<uint8_t> rgb;  // filter bytes checked and removed
};

DecodedPng Decode(const std::string& png) {
  DecodedPng out;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::string idat;
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t length = U32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string data = png.substr(at + 8, length);
    const uint32_t crc = U32(png, at + 8 + length);
    const std::string body = png.substr(at + 4, 4 + length);
    EXPECT_EQ(crc, crc32(0L, reinterpret_cast<const Bytef*>(body.data()),
                         static_cast<uInt>(body.size())))
        << "CRC of " << type;
    out.chunk_types.push_back(type);
    if (type == "IHDR") {
      EXPECT_EQ(length, 13u);
      out.width = U32(data, 0);
      out.height = U32(data, 4);
      EXPECT_EQ(data[8], 8);   // bit depth
      EXPECT_EQ(data[9], 2);   // RGB
      EXPECT_EQ(data[10], 0);  // deflate
      EXPECT_EQ(data[11], 0);  // filter method
      EXPECT_EQ(data[12], 0);  // no interlace
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + length;
  }
  EXPECT_EQ(at, png.size());
  const size_t stride = 1 + 3 * static_cast<size_t>(out.width);
  std::vector<uint8_t> raw(stride * out.height);
  uLongf size = raw.size();
  EXPECT_EQ(uncompress(raw.data(), &size,
                       reinterpret_cast<const Bytef*>(idat.data()),
                       static_cast<uLong>(idat.size())),
            Z_OK);
  EXPECT_EQ(size, raw.size());
  for (uint32_t y = 0; y < out.height; ++y) {
    EXPECT_EQ(raw[y * stride], 0) << "filter byte of row " << y;
    out.rgb.insert(out.rgb.end(), raw.begin() + y * stride + 1,
                   raw.begin() + (y + 1) * stride);
  }
  return out;
}

Rgb Pixel(const DecodedPng& png, int x, int y) {
  const size_t i = (static_cast<size_t>(y) * png.width + x) * 3;
  return {png.rgb[i], png.rgb[i + 1], png.rgb[i + 2]};
}

int CountColor(const DecodedPng& png, Rgb color, int x0, int y0, int x1,
               int y1) {
  int n = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) n += Pixel(png, x, y) == color;
  }
  return n;
}

TEST(PngChartTest, AWellFormedPngWithTheSeriesWhereTheDataIs) {
  const std::vector<PlotSeries> series = {
      {"loss", {{0, 2.0}, {50, 1.0}, {100, 0.5}}},
      {"eval_accuracy", {{100, 0.9}}},
  };
  ChartOptions options;
  options.title = "job-1 mnist";
  absl::StatusOr<std::string> png = RenderPngChart(series, options);
  ASSERT_TRUE(png.ok()) << png.status();
  const DecodedPng decoded = Decode(*png);
  EXPECT_EQ(decoded.width, 800u);
  EXPECT_EQ(decoded.height, 450u);
  EXPECT_EQ(decoded.chunk_types,
            (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));

  ChartLayout layout;
  ASSERT_TRUE(LayoutChart(series, options, &layout));
  const Rgb loss_color = ParseHexColor(SeriesColor(0));
  const Rgb eval_color = ParseHexColor(SeriesColor(1));
  EXPECT_EQ(loss_color, (Rgb{0x00, 0x72, 0xB2}));
  auto at = [&](double x, double y) {
    return Pixel(decoded, static_cast<int>(std::lround(layout.X(x))),
                 static_cast<int>(std::lround(layout.Y(y))));
  };
  // The loss line's first, middle and last points, and the one-point
  // series' disc.
  EXPECT_EQ(at(0, 2.0), loss_color);
  EXPECT_EQ(at(50, 1.0), loss_color);
  EXPECT_EQ(at(100, 0.5), loss_color);
  EXPECT_EQ(at(100, 0.9), eval_color);
  // Away from the lines the plot is white (or a grid line), never a series.
  const Rgb empty = at(75, 1.8);
  EXPECT_TRUE(empty == (Rgb{255, 255, 255}) || empty == (Rgb{0xdd, 0xdd, 0xdd}));
  // Tick labels in the left margin and the x axis margin; a legend swatch of
  // each colour right of the plot.
  const Rgb ink{0x33, 0x33, 0x33};
  const int plot_right = static_cast<int>(layout.left + layout.plot_w);
  EXPECT_GT(CountColor(decoded, ink, 0, 0, static_cast<int>(layout.left) - 6,
                       decoded.height), 50);
  EXPECT_GT(CountColor(decoded, ink, 0,
                       static_cast<int>(layout.top + layout.plot_h) + 6,
                       decoded.width, decoded.height), 50);
  EXPECT_GT(CountColor(decoded, loss_color, plot_right + 10, 0, decoded.width,
                       decoded.height), 20);
  EXPECT_GT(CountColor(decoded, eval_color, plot_right + 10, 0, decoded.width,
                       decoded.height), 20);
}

TEST(PngChartTest, NothingToDrawIsAnError) {
  EXPECT_FALSE(RenderPngChart({{"loss", {}}}, ChartOptions()).ok());
}

TEST(CanvasTest, FontDrawsKnownGlyphsAndLowerCaseAsUpper) {
  Canvas a(12, 7, {255, 255, 255});
  a.Text(0, 0, "1l", {0, 0, 0});
  Canvas b(12, 7, {255, 255, 255});
  b.Text(0, 0, "1L", {0, 0, 0});
  EXPECT_EQ(a.pixels(), b.pixels());
  // '1': the top of its stem at column 2, its foot spans columns 1-3.
  EXPECT_EQ(a.At(2, 0), (Rgb{0, 0, 0}));
  EXPECT_EQ(a.At(0, 0), (Rgb{255, 255, 255}));
  EXPECT_EQ(a.At(1, 6), (Rgb{0, 0, 0}));
  EXPECT_EQ(a.At(3, 6), (Rgb{0, 0, 0}));
  EXPECT_EQ(Canvas::TextWidth("12"), 11);
}

TEST(CanvasTest, ThickLinesCoverTheirEndsAndStayInside) {
  Canvas c(10, 10, {255, 255, 255});
  c.Line(-5, -5, 20, 20, {1, 2, 3}, 2);  // clipped, no crash
  EXPECT_EQ(c.At(0, 0), (Rgb{1, 2, 3}));
  EXPECT_EQ(c.At(9, 9), (Rgb{1, 2, 3}));
  EXPECT_EQ(c.At(9, 0), (Rgb{255, 255, 255}));
}

}  // namespace
}  // namespace trainctl::client
