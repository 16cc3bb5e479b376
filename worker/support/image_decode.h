#pragma once

// JPEG (libjpeg-turbo) and PNG (libpng) images decoded from memory into
// 8-bit pixels, channel-last. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl::train {

struct DecodedImage {
  int height = 0, width = 0;
  int channels = 0;             // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // height * width * channels, row-major HWC
};

// Grayscale stays one channel; colour (with or without alpha, palette
// included) becomes RGB. INVALID_ARGUMENT naming no pixel or byte when the
// data is not a decodable image of that kind or is over 2^26 pixels.
absl::StatusOr<DecodedImage> DecodeJpeg(const std::string& bytes);
absl::StatusOr<DecodedImage> DecodePng(const std::string& bytes);

}  // namespace trainctl::train
