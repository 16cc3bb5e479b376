#pragma once

// A small RGB canvas for `trainctl plot -o FILE.png`: pixels, thick lines,
// rectangles, discs and text in a built-in 5x7 bitmap font (digits,
// letters, shown upper case, and the punctuation of tick labels and metric
// names). No anti-aliasing: every pixel has exactly the colour drawn, which
// keeps the chart crisp and testable.

#include <cstdint>
#include <string>
#include <vector>

namespace trainctl::client {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

// "#0072B2" -> {0x00, 0x72, 0xB2}; black for anything else.
Rgb ParseHexColor(const std::string& hex);

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  // Row-major RGB bytes, 3 per pixel.
  const std::vector<uint8_t>& pixels() const { return pixels_; }
  Rgb At(int x, int y) const;

  // Out-of-canvas pixels are ignored by every drawing call.
  void Set(int x, int y, Rgb color);
  // A line `thickness` pixels wide (a square pen centred on the line).
  void Line(double x0, double y0, double x1, double y1, Rgb color,
            int thickness = 1);
  void FillRect(int x, int y, int w, int h, Rgb color);
  void Disc(double cx, double cy, double radius, Rgb color);

  // Text with its top-left corner at (x, y), each glyph 5x7 pixels times
  // `scale` plus one column of spacing. Lower case is drawn as upper case;
  // an unknown character as '?'.
  void Text(int x, int y, const std::string& text, Rgb color, int scale = 1);
  // Width in pixels that Text would take.
  static int TextWidth(const std::string& text, int scale = 1);
  static constexpr int kGlyphHeight = 7;

 private:
  int width_;
  int height_;
  std::vector<uint8_t> pixels_;
};

}  // namespace trainctl::client
