// `plot -o FILE.png`: cairo draws the same chart as the SVG. The PNG is read
// back (cairo's PNG reader, libpng) and its pixels show each job's line in
// its colour where the data puts it, and text in the title band.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef TRAINCTL_HAVE_CAIRO
#include <cairo.h>
#endif

#include <cstdint>
#include <cstring>

#include "client/png_plot.h"

namespace trainctl::client {
namespace {

ChartPanel LossPanel() {
  ChartPanel panel;
  panel.metric = "loss";
  PlotSeries falling, rising;
  falling.name = rising.name = "loss";
  falling.label = "job-1 mlp";
  rising.label = "job-2 cnn";
  for (int s = 0; s <= 100; s += 10) {
    falling.points.emplace_back(s, 2.0 - s * 0.015);  // top left to bottom right
    rising.points.emplace_back(s, 0.5 + s * 0.015);   // bottom left to top right
  }
  panel.series = {falling, rising};
  return panel;
}

#ifdef TRAINCTL_HAVE_CAIRO
struct Image {
  int width = 0, height = 0;
  std::vector<uint32_t> argb;  // row-major
  // Pixels in [x0,x1)x[y0,y1) within `tolerance` of the colour per channel.
  int Count(uint32_t rgb, int x0, int y0, int x1, int y1, int tolerance = 40) const {
    int n = 0;
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        const uint32_t p = argb[static_cast<size_t>(y) * width + x];
        bool close = true;
        for (int shift : {0, 8, 16}) {
          const int a = static_cast<int>((p >> shift) & 0xff);
          const int b = static_cast<int>((rgb >> shift) & 0xff);
          close = close && std::abs(a - b) <= tolerance;
        }
        n += close;
      }
    }
    return n;
  }
};

Image Decode(const std::string& png) {
  struct Reader {
    const std::string* data;
    size_t at = 0;
  } reader{&png};
  cairo_surface_t* surface = cairo_image_surface_create_from_png_stream(
      [](void* closure, unsigned char* out, unsigned int length) {
        auto* r = static_cast<Reader*>(closure);
        if (r->at + length > r->data->size()) return CAIRO_STATUS_READ_ERROR;
        std::memcpy(out, r->data->data() + r->at, length);
        r->at += length;
        return CAIRO_STATUS_SUCCESS;
      },
      &reader);
  Image image;
  EXPECT_EQ(cairo_surface_status(surface), CAIRO_STATUS_SUCCESS);
  image.width = cairo_image_surface_get_width(surface);
  image.height = cairo_image_surface_get_height(surface);
  const int stride = cairo_image_surface_get_stride(surface);
  const unsigned char* data = cairo_image_surface_get_data(surface);
  for (int y = 0; y < image.height; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(data + static_cast<size_t>(y) * stride);
    image.argb.insert(image.argb.end(), row, row + image.width);
  }
  cairo_surface_destroy(surface);
  return image;
}
#endif

TEST(PngChartTest, EachJobsLineInItsColourWhereTheDataIs) {
  ChartOptions options;
  options.title = "job-1 vs job-2";
  absl::StatusOr<std::string> png = RenderPngChart({LossPanel()}, options);
#ifndef TRAINCTL_HAVE_CAIRO
  ASSERT_EQ(png.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(png.status().message()), ::testing::HasSubstr("-o FILE.svg"));
  GTEST_SKIP() << "built without cairo";
#else
  ASSERT_TRUE(png.ok()) << png.status();
  ASSERT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const Image image = Decode(*png);
  const auto [width, height] = ChartSize({LossPanel()}, options);
  ASSERT_EQ(image.width, width);
  ASSERT_EQ(image.height, height);
  const uint32_t blue = 0x0072B2, vermilion = 0xD55E00;
  // Split the plot at mid-height: job 1 falls from the top left, job 2
  // rises from the bottom left.
  const int top = 34 + 22 + 30, bottom = height - 44, mid = (top + bottom) / 2;
  const int left = 70, right = width - 20, centre = (left + right) / 2;
  EXPECT_GT(image.Count(blue, left, top, centre - 20, mid), 50);
  EXPECT_GT(image.Count(blue, centre + 20, mid, right, bottom), 50);
  EXPECT_EQ(image.Count(blue, centre + 40, top, right, mid - 20), 0);
  EXPECT_GT(image.Count(vermilion, left, mid, centre - 20, bottom), 50);
  EXPECT_GT(image.Count(vermilion, centre + 20, top, right, mid), 50);
  // The title and legend are text: dark anti-aliased pixels in their band.
  EXPECT_GT(image.Count(0x333333, 0, 0, width, 34, 60), 100);
  EXPECT_GT(image.Count(0xffffff, 0, 0, width, height, 0), width * height / 2);
#endif
}

TEST(PngChartTest, NothingToDrawIsAnError) {
  ChartPanel empty;
  empty.metric = "loss";
  empty.series.resize(1);
  EXPECT_EQ(RenderPngChart({empty}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace trainctl::client
