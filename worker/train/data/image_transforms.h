#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/train/data/dataset.h"

namespace trainctl::train {

// data.transforms over image batches [n, C, H, W] of float pixels, in
// torchvision's order: resize, random crop (after zero padding),
// horizontal flip, normalisation. Training draws each sample's crop and flip from
// (seed, epoch, sample id) alone, so an epoch's augmented samples are the
// same at any world size, in any batch, and after a restart; evaluation
// takes the centre crop and no flip. Immutable and thread-safe.
class ImageTransforms {
 public:
  // The transforms `spec` asks for, checked against one sample's input
  // shape; null when it asks for none. INVALID_ARGUMENT naming the
  // data.transforms field that does not fit the data.
  static absl::StatusOr<std::shared_ptr<const ImageTransforms>> Create(
      const v1::ImageTransformsSpec& spec, const DataInfo& info, uint64_t seed);

  // One sample's output shape [C, h, w].
  const std::vector<int64_t>& output_shape() const { return output_shape_; }

  // Training transforms; `indices` are the batch rows' sample ids.
  torch::Tensor Train(const torch::Tensor& images,
                      const std::vector<int64_t>& indices, int64_t epoch) const;
  // Evaluation transforms: centre crop, normalisation.
  torch::Tensor Eval(const torch::Tensor& images) const;

  // A training sample's random choices: the crop's top-left corner in the
  // padded image, and whether it is mirrored.
  struct Draw {
    int64_t top = 0;
    int64_t left = 0;
    bool flip = false;
  };
  Draw DrawFor(int64_t sample, int64_t epoch) const;

 private:
  ImageTransforms(const v1::ImageTransformsSpec& spec, std::vector<int64_t> input_shape,
                  uint64_t seed);
  // Writes sample `in` (C, H, W) cropped at (top, left) of its image padded
  // by `pad`, mirrored when `flip`, normalised, to `out` (C, h, w).
  void Apply(const float* in, int64_t top, int64_t left, int64_t pad, bool flip,
             float* out) const;
  torch::Tensor Run(const torch::Tensor& images,
                    const std::function<Draw(int64_t row)>& draw, int64_t pad) const;

  int64_t channels_, in_h_, in_w_;     // input
  int64_t height_, width_;             // after resizing
  int64_t crop_h_, crop_w_;            // output
  int64_t padding_;
  bool random_crop_, flip_;
  std::vector<float> mean_, inv_std_;  // per channel (empty = no normalisation)
  uint64_t seed_;
  std::vector<int64_t> output_shape_;
};

// Images [n, C, H, W] (float) resized to [n, C, height, width] as
// torchvision's Resize((height, width)) does on tensors: bilinear,
// antialiased when shrinking. The same tensor when it has that size.
torch::Tensor ResizeImages(const torch::Tensor& images, int64_t height, int64_t width);

// normalize.from_data: the samples its statistics are taken from, at most.
inline constexpr int64_t kNormalizeSamples = 4096;

// Per-channel mean and (population) standard deviation of the pixels of
// min(kNormalizeSamples, size) training samples picked by a seeded order,
// as torchvision users compute them for Normalize: the same on every rank.
// INVALID_ARGUMENT naming data.transforms.normalize when the samples are
// not images or a channel is constant.
absl::StatusOr<v1::NormalizeSpec> NormalizationFromData(const Dataset& train,
                                                        const DataInfo& info,
                                                        uint64_t seed);

// `data` with ImageTransforms::Eval applied to every gathered batch.
std::shared_ptr<const Dataset> WithEvalTransforms(
    std::shared_ptr<const Dataset> data,
    std::shared_ptr<const ImageTransforms> transforms);

}  // namespace trainctl::train
