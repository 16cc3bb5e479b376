// format webdataset: tar shards of images with class labels, as
// WebDataset writes them; images decoded per batch, in parallel.

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data_probe.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "common/webdataset_index.h"
#include "worker/support/image_decode.h"
#include "worker/train/data/image_transforms.h"
#include "worker/train/data/readers.h"

namespace trainctl::train {
namespace {

constexpr float kPixelScale = 1.0f / 255;

class WebDatasetImages : public Dataset {
 public:
  // Images come out [channels, height, width]: resized to it when
  // `resize`, otherwise each must have that size.
  WebDatasetImages(std::string where, int fd, std::vector<WebDatasetSample> samples,
                   int channels, int height, int width, bool resize)
      : where_(std::move(where)), fd_(fd), samples_(std::move(samples)),
        channels_(channels), height_(height), width_(width), resize_(resize) {}
  ~WebDatasetImages() override { ::close(fd_); }
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }

  // Sample i's pixels, decoded, as float [C, H, W] in [0, 1] into `out`.
  // Throws std::runtime_error naming the sample by position.
  void DecodeInto(int64_t i, float* out) const {
    const WebDatasetSample& s = samples_[static_cast<size_t>(i)];
    std::string bytes(static_cast<size_t>(s.image_size), '\0');
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done,
                                static_cast<off_t>(s.image_offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw std::runtime_error(absl::StrCat(where_, ": cannot read sample ", i,
                                              "'s image: the file changed or "
                                              "cannot be read"));
      }
      done += static_cast<size_t>(n);
    }
    absl::StatusOr<DecodedImage> image = s.png ? DecodePng(bytes) : DecodeJpeg(bytes);
    if (!image.ok()) {
      throw std::runtime_error(absl::StrCat(where_, ": sample ", i, ": ",
                                            image.status().message()));
    }
    // A grayscale image in a colour set becomes RGB, as PIL's
    // convert("RGB") in torchvision's loaders makes it.
    const bool gray_in_colour = image->channels == 1 && channels_ == 3;
    if (image->channels != channels_ && !gray_in_colour) {
      throw std::runtime_error(absl::StrCat(
          where_, ": sample ", i, " is RGB but sample 0 is grayscale (a set "
          "whose first image is grayscale must be all grayscale)"));
    }
    if (!resize_ && (image->height != height_ || image->width != width_)) {
      throw std::runtime_error(absl::StrCat(
          where_, ": sample ", i, " is ", image->height, "x", image->width,
          " but sample 0 is ", height_, "x", width_,
          " (images of several sizes need data.transforms.resize)"));
    }
    if (image->height == height_ && image->width == width_) {
      ToChw(*image, out);
      return;
    }
    torch::Tensor pixels = torch::empty({1, channels_, image->height, image->width});
    ToChw(*image, pixels.data_ptr<float>());
    torch::Tensor resized = ResizeImages(pixels, height_, width_).contiguous();
    std::memcpy(out, resized.data_ptr<float>(), sizeof(float) * resized.numel());
  }

  // HWC bytes to CHW floats in [0, 1], gray repeated over a colour set's
  // channels.
  void ToChw(const DecodedImage& image, float* out) const {
    const int64_t plane = int64_t{image.height} * image.width;
    for (int64_t p = 0; p < plane; ++p) {
      for (int c = 0; c < channels_; ++c) {
        const int from = image.channels == 1 ? 0 : c;
        out[c * plane + p] = image.pixels[p * image.channels + from] * kPixelScale;
      }
    }
  }

  Batch Gather(const std::vector<int64_t>& indices) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    for (int64_t i : indices) {
      if (i < 0 || i >= size()) {
        throw std::out_of_range(absl::StrCat("row ", i, " of ", size()));
      }
    }
    torch::Tensor inputs = torch::empty({n, channels_, height_, width_}, torch::kFloat32);
    torch::Tensor targets = torch::empty({n}, torch::kInt64);
    float* pixels = inputs.data_ptr<float>();
    int64_t* labels = targets.data_ptr<int64_t>();
    const int64_t per_image = int64_t{channels_} * height_ * width_;
    // Decoding is most of a batch's cost: the rank's intra-op threads
    // share it. An error in one is thrown here, after the others finish.
    std::vector<std::string> errors(static_cast<size_t>(n));
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        try {
          DecodeInto(indices[r], pixels + r * per_image);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
        labels[r] = samples_[static_cast<size_t>(indices[r])].label;
      }
    });
    for (const std::string& error : errors) {
      if (!error.empty()) throw std::runtime_error(error);
    }
    return {inputs, targets};
  }

 private:
  std::string where_;
  int fd_;
  std::vector<WebDatasetSample> samples_;
  int channels_, height_, width_;
  bool resize_;
};

}  // namespace

absl::StatusOr<LoadedSet> ReadWebDataset(const ReadRequest& req,
                                         const v1::DataSpec& data) {
  if (req.task != Task::kClassification) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task: data.format webdataset holds labelled images; task ", TaskName(req.task),
        " needs another format"));
  }
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(req.field, req.path, &st));
  absl::StatusOr<std::vector<WebDatasetSample>> samples =
      IndexWebDatasetTar(fd, st.st_size, req.field, req.path);
  if (!samples.ok()) {
    ::close(fd);
    return samples.status();
  }
  if (req.limit > 0 && static_cast<int64_t>(samples->size()) > req.limit) {
    samples->resize(static_cast<size_t>(req.limit));
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  // Sample 0 fixes the shape every image must have.
  const std::string where = absl::StrCat(req.field, ": ", req.path);
  auto fail = [&](const std::string& why) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(where, ": sample 0: ", why));
  };
  std::string bytes;
  if (!ReadFullyAt(fd, (*samples)[0].image_offset,
                   static_cast<size_t>((*samples)[0].image_size), &bytes)) {
    return fail("cannot read its image");
  }
  absl::StatusOr<DecodedImage> image =
      (*samples)[0].png ? DecodePng(bytes) : DecodeJpeg(bytes);
  if (!image.ok()) return fail(std::string(image.status().message()));
  int64_t max_label = 0;
  for (const WebDatasetSample& s : *samples) max_label = std::max(max_label, s.label);
  const auto& resize = data.transforms().resize();
  const bool resized = resize.size() == 2;
  const int height = resized ? resize[0] : image->height;
  const int width = resized ? resize[1] : image->width;
  LoadedSet out;
  out.info.input_shape = {image->channels, height, width};
  out.info.num_classes = max_label + 1;
  out.data = std::make_shared<WebDatasetImages>(where, fd, *std::move(samples),
                                                image->channels, height, width,
                                                resized);
  return out;
}

}  // namespace trainctl::train
