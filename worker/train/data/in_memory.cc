#include "worker/train/data/in_memory.h"

#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"

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

OrderedSubsetDataset::OrderedSubsetDataset(std::shared_ptr<const Dataset> base,
                                           EpochOrder order, int64_t first,
                                           int64_t count)
    : base_(std::move(base)), order_(order), first_(first), count_(count) {}

Batch OrderedSubsetDataset::Gather(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t i : indices) {
    if (i < 0 || i >= count_) {
      throw std::out_of_range(absl::StrCat("row ", i, " of ", count_));
    }
    mapped.push_back(order_.At(first_ + i));
  }
  return base_->Gather(mapped);
}

}  // namespace trainctl::train
