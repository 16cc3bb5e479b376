#include "worker/train/data/image_transforms.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"

namespace trainctl::train {
namespace {

// SplitMix64's finaliser: a bijection on 64 bits that mixes every input
// bit into every output bit, enough for independent per-sample draws.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, n) from 64 random bits (Lemire's multiply-shift; the bias
// is below 2^-32 for any image size).
int64_t Below(uint64_t bits, int64_t n) {
  return static_cast<int64_t>(((bits >> 32) * static_cast<uint64_t>(n)) >> 32);
}

// Keeps augmentation draws apart from the other seeded streams.
constexpr uint64_t kAugmentSalt = 0x61756720696d6721ULL;

// torchvision's CenterCrop offset: round((size - crop) / 2) half to even
// when the crop fits, zero padding split with the extra row at the end
// when it does not.
int64_t CentreOffset(int64_t size, int64_t crop) {
  if (size >= crop) return static_cast<int64_t>(std::nearbyint((size - crop) / 2.0));
  return -((crop - size) / 2);
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The "epoch" of the order normalize.from_data samples by: apart from the
// training epochs (0, 1, ...) and the eval_fraction split (-1).
constexpr int64_t kNormalizeEpoch = -2;

absl::Status CheckImages(const DataInfo& info, const std::string& field) {
  if (!info.input_names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": apply to single image inputs; the data has ",
        info.input_names.size(), " named inputs"));
  }
  if (info.input_shape.size() == 3 && !info.integer_inputs) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": apply to float images [C, H, W]; the data's samples are ",
      info.integer_inputs ? "token ids " : "features ", ShapeText(info.input_shape)));
}

}  // namespace

absl::StatusOr<v1::NormalizeSpec> NormalizationFromData(const Dataset& train,
                                                        const DataInfo& info,
                                                        uint64_t seed) {
  RETURN_IF_ERROR(CheckImages(info, "data.transforms.normalize"));
  const int64_t n = train.size();
  const int64_t take = std::min(n, kNormalizeSamples);
  const EpochOrder order(seed, kNormalizeEpoch, n);
  std::vector<int64_t> picked;
  for (int64_t p = 0; p < take; ++p) picked.push_back(order.At(p));
  std::sort(picked.begin(), picked.end());  // file order: sequential reads
  const int64_t channels = info.input_shape[0];
  torch::Tensor sum = torch::zeros({channels}, torch::kFloat64);
  torch::Tensor squares = torch::zeros({channels}, torch::kFloat64);
  constexpr size_t kChunk = 256;
  for (size_t begin = 0; begin < picked.size(); begin += kChunk) {
    const std::vector<int64_t> chunk(
        picked.begin() + begin, picked.begin() + std::min(picked.size(), begin + kChunk));
    const torch::Tensor x = train.Gather(chunk).inputs.to(torch::kFloat64);
    sum += x.sum({0, 2, 3});
    squares += (x * x).sum({0, 2, 3});
  }
  const double count = double(take) * info.input_shape[1] * info.input_shape[2];
  const torch::Tensor mean = sum / count;
  const torch::Tensor std = (squares / count - mean * mean).clamp_min(0).sqrt();
  v1::NormalizeSpec out;
  for (int64_t c = 0; c < channels; ++c) {
    const double s = std[c].item<double>();
    if (!(s > 1e-12)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.transforms.normalize.from_data: channel ", c, " of ", take,
          " training images is constant (std 0); give normalize.mean and std"));
    }
    out.add_mean(mean[c].item<double>());
    out.add_std(s);
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const ImageTransforms>> ImageTransforms::Create(
    const v1::ImageTransformsSpec& spec, const DataInfo& info, uint64_t seed) {
  const bool any = spec.has_normalize() || spec.has_random_crop() ||
                   spec.horizontal_flip() || spec.resize_size() == 2;
  if (!any) return std::shared_ptr<const ImageTransforms>();
  RETURN_IF_ERROR(CheckImages(info, "data.transforms"));
  std::vector<int64_t> shape = info.input_shape;
  if (spec.resize_size() == 2) shape = {shape[0], spec.resize(0), spec.resize(1)};
  const v1::NormalizeSpec& norm = spec.normalize();
  if (norm.from_data() && norm.mean_size() == 0) {
    return absl::InvalidArgumentError(
        "data.transforms.normalize.from_data: not computed (NormalizationFromData)");
  }
  if (norm.mean_size() > 1 && norm.mean_size() != shape[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.transforms.normalize.mean: lists ", norm.mean_size(),
        " values but the images have ", shape[0],
        " channels (give one per channel, or one for all)"));
  }
  const v1::RandomCropSpec& crop = spec.random_crop();
  if (norm.mean_size() != norm.std_size() || crop.size_size() == 1) {
    return absl::InvalidArgumentError("data.transforms: malformed (not from a parsed spec)");
  }
  if (crop.size_size() == 2) {
    const int64_t padded_h = shape[1] + 2 * int64_t{crop.padding()};
    const int64_t padded_w = shape[2] + 2 * int64_t{crop.padding()};
    if (crop.size(0) > padded_h || crop.size(1) > padded_w) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.transforms.random_crop.size: [", crop.size(0), ", ", crop.size(1),
          "] is larger than the padded images (", padded_h, "x", padded_w, ": ",
          shape[1], "x", shape[2], " with padding ", crop.padding(), ")"));
    }
  }
  return std::shared_ptr<const ImageTransforms>(
      new ImageTransforms(spec, info.input_shape, seed));
}

ImageTransforms::ImageTransforms(const v1::ImageTransformsSpec& spec,
                                 std::vector<int64_t> input_shape, uint64_t seed)
    : channels_(input_shape[0]),
      in_h_(input_shape[1]),
      in_w_(input_shape[2]),
      height_(spec.resize_size() == 2 ? spec.resize(0) : in_h_),
      width_(spec.resize_size() == 2 ? spec.resize(1) : in_w_),
      crop_h_(spec.random_crop().size_size() == 2 ? spec.random_crop().size(0) : height_),
      crop_w_(spec.random_crop().size_size() == 2 ? spec.random_crop().size(1) : width_),
      padding_(spec.random_crop().padding()),
      random_crop_(spec.has_random_crop()),
      flip_(spec.horizontal_flip()),
      seed_(seed),
      output_shape_({input_shape[0], crop_h_, crop_w_}) {
  const v1::NormalizeSpec& norm = spec.normalize();
  for (int64_t c = 0; c < channels_ && norm.mean_size() > 0; ++c) {
    const int i = norm.mean_size() == 1 ? 0 : static_cast<int>(c);
    mean_.push_back(static_cast<float>(norm.mean(i)));
    inv_std_.push_back(static_cast<float>(1.0 / norm.std(i)));
  }
}

ImageTransforms::Draw ImageTransforms::DrawFor(int64_t sample, int64_t epoch) const {
  const uint64_t key = Mix(Mix(Mix(seed_ ^ kAugmentSalt) ^ static_cast<uint64_t>(epoch)) ^
                           static_cast<uint64_t>(sample));
  Draw d;
  if (random_crop_) {
    d.top = Below(key, height_ + 2 * padding_ - crop_h_ + 1);
    d.left = Below(Mix(key), width_ + 2 * padding_ - crop_w_ + 1);
  }
  if (flip_) d.flip = (Mix(Mix(key)) >> 63) != 0;
  return d;
}

void ImageTransforms::Apply(const float* in, int64_t top, int64_t left, int64_t pad,
                            bool flip, float* out) const {
  for (int64_t c = 0; c < channels_; ++c) {
    const float shift = mean_.empty() ? 0.f : mean_[c];
    const float scale = mean_.empty() ? 1.f : inv_std_[c];
    const float* plane = in + c * height_ * width_;
    for (int64_t y = 0; y < crop_h_; ++y) {
      const int64_t sy = top + y - pad;
      for (int64_t x = 0; x < crop_w_; ++x) {
        // Mirroring the crop: output column x shows crop column w-1-x.
        const int64_t sx = left + (flip ? crop_w_ - 1 - x : x) - pad;
        const bool inside = sy >= 0 && sy < height_ && sx >= 0 && sx < width_;
        const float v = inside ? plane[sy * width_ + sx] : 0.f;
        *out++ = (v - shift) * scale;
      }
    }
  }
}

torch::Tensor ImageTransforms::Run(const torch::Tensor& images,
                                   const std::function<Draw(int64_t)>& draw,
                                   int64_t pad) const {
  if (images.dim() != 4 || images.size(1) != channels_ || images.size(2) != in_h_ ||
      images.size(3) != in_w_ || images.scalar_type() != torch::kFloat32) {
    throw std::invalid_argument("image transforms: batch is not float [n, C, H, W]");
  }
  const torch::Tensor in = ResizeImages(images, height_, width_).contiguous();
  const int64_t n = in.size(0);
  torch::Tensor out = torch::empty({n, channels_, crop_h_, crop_w_}, torch::kFloat32);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const int64_t in_size = channels_ * height_ * width_;
  const int64_t out_size = channels_ * crop_h_ * crop_w_;
  at::parallel_for(0, n, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const Draw d = draw(r);
      Apply(src + r * in_size, d.top, d.left, pad, d.flip, dst + r * out_size);
    }
  });
  return out;
}

torch::Tensor ImageTransforms::Train(const torch::Tensor& images,
                                     const std::vector<int64_t>& indices,
                                     int64_t epoch) const {
  if (static_cast<int64_t>(indices.size()) != images.size(0)) {
    throw std::invalid_argument("image transforms: one sample id per row");
  }
  return Run(images, [&](int64_t r) { return DrawFor(indices[r], epoch); }, padding_);
}

torch::Tensor ImageTransforms::Eval(const torch::Tensor& images) const {
  const Draw centre{CentreOffset(height_, crop_h_), CentreOffset(width_, crop_w_), false};
  return Run(images, [&](int64_t) { return centre; }, 0);
}

torch::Tensor ResizeImages(const torch::Tensor& images, int64_t height, int64_t width) {
  if (images.size(2) == height && images.size(3) == width) return images;
  namespace F = torch::nn::functional;
  const bool shrinks = height < images.size(2) || width < images.size(3);
  return F::interpolate(images, F::InterpolateFuncOptions()
                                    .size(std::vector<int64_t>{height, width})
                                    .mode(torch::kBilinear)
                                    .align_corners(false)
                                    .antialias(shrinks));
}

namespace {

class EvalTransformed : public Dataset {
 public:
  EvalTransformed(std::shared_ptr<const Dataset> data,
                  std::shared_ptr<const ImageTransforms> transforms)
      : data_(std::move(data)), transforms_(std::move(transforms)) {}
  int64_t size() const override { return data_->size(); }
  Batch Gather(const std::vector<int64_t>& indices) const override {
    Batch batch = data_->Gather(indices);
    batch.inputs = transforms_->Eval(batch.inputs);
    return batch;
  }

 private:
  std::shared_ptr<const Dataset> data_;
  std::shared_ptr<const ImageTransforms> transforms_;
};

}  // namespace

std::shared_ptr<const Dataset> WithEvalTransforms(
    std::shared_ptr<const Dataset> data,
    std::shared_ptr<const ImageTransforms> transforms) {
  return std::make_shared<EvalTransformed>(std::move(data), std::move(transforms));
}

}  // namespace trainctl::train
