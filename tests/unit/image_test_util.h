#pragma once

// Images and tar files built in the test, for the webdataset reader and
// probe: PNG and JPEG encoded with libpng and libjpeg, and a ustar writer.
// Torch-free; link PNG::PNG and JPEG::JPEG.

#include <png.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <jpeglib.h>

namespace trainctl::testing {

// `pixels` row-major HWC, `channels` 1 or 3.
inline std::string EncodePng(const std::vector<uint8_t>& pixels, int height,
                             int width, int channels) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(width);
  png.height = static_cast<png_uint_32>(height);
  png.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&png, nullptr, &size, 0, pixels.data(), 0, nullptr);
  std::string out(size, '\0');
  png_image_write_to_memory(&png, out.data(), &size, 0, pixels.data(), 0, nullptr);
  out.resize(size);
  return out;
}

inline std::string EncodeJpeg(const std::vector<uint8_t>& pixels, int height,
                              int width, int channels, int quality = 95) {
  jpeg_compress_struct info;
  jpeg_error_mgr error;
  info.err = jpeg_std_error(&error);
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  info.input_components = channels;
  info.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels.data() +
                                        info.next_scanline * width * channels);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  std::string out(reinterpret_cast<char*>(buffer), size);
  jpeg_destroy_compress(&info);
  std::free(buffer);
  return out;
}

// A ustar archive of (name, bytes) regular files, as `tar cf` writes one.
inline std::string Tar(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [name, bytes] : files) {
    std::string header(512, '\0');
    std::memcpy(header.data(), name.data(), std::min<size_t>(name.size(), 99));
    std::snprintf(header.data() + 100, 8, "%07o", 0644);
    std::snprintf(header.data() + 108, 8, "%07o", 0);
    std::snprintf(header.data() + 116, 8, "%07o", 0);
    std::snprintf(header.data() + 124, 12, "%011lo", static_cast<unsigned long>(bytes.size()));
    std::snprintf(header.data() + 136, 12, "%011o", 0);
    header[156] = '0';
    std::memcpy(header.data() + 257, "ustar\0" "00", 8);
    std::memset(header.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : header) sum += c;
    std::snprintf(header.data() + 148, 8, "%06o", sum);
    out += header;
    out += bytes;
    out.append((512 - bytes.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  return out;
}

}  // namespace trainctl::testing
