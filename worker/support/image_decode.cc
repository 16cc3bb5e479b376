#include "worker/support/image_decode.h"

#include <png.h>

#include <csetjmp>
#include <cstring>
#include <cstdio>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

namespace trainctl::train {
namespace {

constexpr int64_t kMaxPixels = int64_t{1} << 26;

struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
};

void OnJpegError(j_common_ptr info) {
  // libjpeg's messages can describe the data; none is kept.
  std::longjmp(reinterpret_cast<JpegError*>(info->err)->jump, 1);
}

void OnJpegWarning(j_common_ptr, int) {}

}  // namespace

absl::StatusOr<DecodedImage> DecodeJpeg(const std::string& bytes) {
  jpeg_decompress_struct info;
  JpegError error;
  info.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = OnJpegError;
  error.manager.emit_message = OnJpegWarning;
  DecodedImage image;
  // Nothing with a destructor may be created between here and the jump.
  if (setjmp(error.jump) != 0) {
    jpeg_destroy_decompress(&info);
    return absl::InvalidArgumentError("not a decodable JPEG image");
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  const bool gray = info.num_components == 1;
  if (!gray && info.num_components != 3) {
    jpeg_destroy_decompress(&info);
    return absl::InvalidArgumentError("JPEG with other than 1 or 3 components (CMYK?)");
  }
  info.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  if (int64_t{info.image_width} * info.image_height > kMaxPixels) {
    jpeg_destroy_decompress(&info);
    return absl::InvalidArgumentError("JPEG over 2^26 pixels");
  }
  jpeg_start_decompress(&info);
  image.height = static_cast<int>(info.output_height);
  image.width = static_cast<int>(info.output_width);
  image.channels = info.output_components;
  image.pixels.resize(static_cast<size_t>(image.height) * image.width * image.channels);
  while (info.output_scanline < info.output_height) {
    unsigned char* row = image.pixels.data() +
                         static_cast<size_t>(info.output_scanline) * image.width *
                             image.channels;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return image;
}

absl::StatusOr<DecodedImage> DecodePng(const std::string& bytes) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) {
    png_image_free(&png);
    return absl::InvalidArgumentError("not a decodable PNG image");
  }
  const bool gray = (png.format & PNG_FORMAT_FLAG_COLOR) == 0;
  png.format = gray ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;  // alpha composited on black
  if (int64_t{png.width} * png.height > kMaxPixels) {
    png_image_free(&png);
    return absl::InvalidArgumentError("PNG over 2^26 pixels");
  }
  DecodedImage image;
  image.height = static_cast<int>(png.height);
  image.width = static_cast<int>(png.width);
  image.channels = gray ? 1 : 3;
  image.pixels.resize(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, image.pixels.data(), 0, nullptr)) {
    png_image_free(&png);
    return absl::InvalidArgumentError("not a decodable PNG image");
  }
  return image;
}

}  // namespace trainctl::train
