#include "worker/train/data/in_memory.h"

#include <utility>

namespace trainctl::train {
namespace {

// A tensor view of the caller's index list: no copy, and index_select only
// reads it, so dropping const is safe.
torch::Tensor IndexTensor(const std::vector<int64_t>& indices) {
  return torch::from_blob(const_cast<int64_t*>(indices.data()),
                          {static_cast<int64_t>(indices.size())},
                          torch::kInt64);
}

}  // namespace

TensorDataset::TensorDataset(torch::Tensor inputs, torch::Tensor targets,
                             double input_scale)
    : inputs_(inputs.contiguous()),
      targets_(targets.contiguous()),
      input_scale_(input_scale) {}

Batch TensorDataset::Gather(const std::vector<int64_t>& indices) const {
  const torch::Tensor idx = IndexTensor(indices);
  torch::Tensor inputs = inputs_.index_select(0, idx);
  if (input_scale_ != 0) inputs = inputs.to(torch::kFloat32).mul_(input_scale_);
  return {inputs, targets_.index_select(0, idx)};
}

TokenWindowDataset::TokenWindowDataset(torch::Tensor tokens, int64_t seq_len)
    : tokens_(tokens.contiguous()),
      seq_len_(seq_len),
      size_((tokens_.numel() - 1) / seq_len) {}

Batch TokenWindowDataset::Gather(const std::vector<int64_t>& indices) const {
  // unfold is a strided view of all windows (overlapping by one token); only
  // the selected rows are copied.
  const torch::Tensor windows = tokens_.unfold(0, seq_len_ + 1, seq_len_)
                                    .index_select(0, IndexTensor(indices))
                                    .to(torch::kInt64);
  return {windows.narrow(1, 0, seq_len_).contiguous(),
          windows.narrow(1, 1, seq_len_).contiguous()};
}

SubsetDataset::SubsetDataset(std::shared_ptr<const Dataset> base,
                             std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {}

Batch SubsetDataset::Gather(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t i : indices)
    mapped.push_back(indices_.at(i));  // throws like torch
  return base_->Gather(mapped);
}

}  // namespace trainctl::train
