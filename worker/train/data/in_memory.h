#pragma once

// Dataset implementations over tensors already in memory.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "worker/train/data/dataset.h"

namespace trainctl::train {

// Row i is (inputs[i], targets[i]). Gather is an index_select per tensor.
class TensorDataset : public Dataset {
 public:
  // Both tensors share dim 0; they are made contiguous once here. With an
  // input_scale, inputs are stored as they came (e.g. uint8 pixels, a
  // quarter of the memory and no conversion pass at load) and each
  // gathered batch is converted to float32 and multiplied by the scale.
  TensorDataset(torch::Tensor inputs, torch::Tensor targets,
                double input_scale = 0);
  int64_t size() const override { return inputs_.size(0); }
  Batch Gather(const std::vector<int64_t>& indices) const override;

  const torch::Tensor& inputs() const { return inputs_; }
  const torch::Tensor& targets() const { return targets_; }

 private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
  double input_scale_;
};

// Next-token windows over one flat token stream: sample i covers tokens
// [i*seq_len, i*seq_len + seq_len + 1); inputs are its first seq_len ids and
// targets the last seq_len (shifted by one), both int64 [seq_len]. Windows
// are cut at Gather time, so memory stays one copy of the stream.
class TokenWindowDataset : public Dataset {
 public:
  // `tokens` is 1-D integer (int32 keeps big corpora small) with at least
  // seq_len + 1 entries.
  TokenWindowDataset(torch::Tensor tokens, int64_t seq_len);
  int64_t size() const override { return size_; }
  Batch Gather(const std::vector<int64_t>& indices) const override;

  const torch::Tensor& tokens() const { return tokens_; }
  int64_t seq_len() const { return seq_len_; }

 private:
  torch::Tensor tokens_;
  int64_t seq_len_;
  int64_t size_;
};

// A view of `base` restricted to `indices` (row i is base row indices[i]);
// used for the eval_fraction split and for limits on derived sets.
class SubsetDataset : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base,
                std::vector<int64_t> indices);
  int64_t size() const override {
    return static_cast<int64_t>(indices_.size());
  }
  Batch Gather(const std::vector<int64_t>& indices) const override;

  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

}  // namespace trainctl::train
