#include "worker/train/data/in_memory.h"

#include <algorithm>
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
                             double input_scale, NamedInputs more)
    : inputs_(inputs.contiguous()),
      targets_(targets.contiguous()),
      input_scale_(input_scale),
      more_(std::move(more)) {
  for (auto& named : more_) named.second = named.second.contiguous();
}

Batch TensorDataset::Gather(const std::vector<int64_t>& indices) const {
  const torch::Tensor idx = IndexTensor(indices);
  torch::Tensor inputs = inputs_.index_select(0, idx);
  if (input_scale_ != 0) inputs = inputs.to(torch::kFloat32).mul_(input_scale_);
  Batch batch{inputs, targets_.index_select(0, idx)};
  for (const auto& [name, values] : more_) {
    batch.more_inputs.emplace_back(name, values.index_select(0, idx));
  }
  return batch;
}

ConcatDataset::ConcatDataset(std::vector<std::shared_ptr<const Dataset>> parts)
    : parts_(std::move(parts)) {
  int64_t end = 0;
  for (const auto& part : parts_) ends_.push_back(end += part->size());
}

Batch ConcatDataset::Gather(const std::vector<int64_t>& indices) const {
  if (indices.empty()) return parts_.front()->Gather(indices);
  // Per shard: the rows asked of it and where each goes in the batch.
  std::vector<std::vector<int64_t>> rows(parts_.size()), slots(parts_.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    if (i < 0 || i >= size()) {
      throw std::out_of_range(absl::StrCat("row ", i, " of ", size()));
    }
    const size_t s = std::upper_bound(ends_.begin(), ends_.end(), i) - ends_.begin();
    rows[s].push_back(i - (s == 0 ? 0 : ends_[s - 1]));
    slots[s].push_back(static_cast<int64_t>(k));
  }
  std::vector<torch::Tensor> inputs, targets, order;
  NamedInputs named;  // each shard's more_inputs, concatenated in place
  std::vector<std::vector<torch::Tensor>> more;
  for (size_t s = 0; s < parts_.size(); ++s) {
    if (rows[s].empty()) continue;
    Batch part = parts_[s]->Gather(rows[s]);
    inputs.push_back(part.inputs);
    targets.push_back(part.targets);
    order.push_back(torch::tensor(slots[s], torch::kInt64));
    if (more.empty()) {
      named = part.more_inputs;
      more.resize(named.size());
    }
    // Shards agree on their input names (CheckShardAgrees).
    for (size_t k = 0; k < more.size(); ++k) more[k].push_back(part.more_inputs[k].second);
  }
  // Rows arrive grouped by shard; scatter them back to the asked order.
  const torch::Tensor where = torch::cat(order);
  const torch::Tensor back = torch::empty_like(where);
  back.index_put_({where}, torch::arange(where.numel(), torch::kInt64));
  Batch batch{torch::cat(inputs).index_select(0, back),
              torch::cat(targets).index_select(0, back)};
  for (size_t k = 0; k < more.size(); ++k) {
    batch.more_inputs.emplace_back(named[k].first,
                                   torch::cat(more[k]).index_select(0, back));
  }
  return batch;
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
