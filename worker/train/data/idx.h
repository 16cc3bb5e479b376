#pragma once

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"
#include "worker/support/decoded_cache.h"

namespace trainctl::train {

// The contents of an IDX image/label file pair: inputs [N, H, W] float,
// labels [N] int64. (Named apart from the Dataset interface of dataset.h.)
// Multiplies stored uint8 pixels into [0, 1] (TensorDataset's input_scale).
constexpr double kPixelScale = 1.0 / 255.0;

struct IdxData {
  torch::Tensor inputs;  // uint8 pixels, [N, H, W]
  torch::Tensor labels;
  int64_t size() const { return labels.size(0); }
};

// Reads an IDX image file and its label file (MNIST / Fashion-MNIST layout),
// gzip-compressed or raw. Pixels stay uint8 (scale by kPixelScale). `limit` > 0 keeps
// only the first `limit` samples. Errors name `field` (the spec field the
// paths came from) and the file, and say what is wrong with it. With a
// `cache`, gzip files are read from their decoded copies there.
absl::StatusOr<IdxData> LoadIdx(const std::string& images_path,
                                const std::string& labels_path, int64_t limit,
                                const std::string& field,
                                const DecodedFileCache* cache = nullptr);

}  // namespace trainctl::train
