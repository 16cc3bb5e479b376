#pragma once

// Dataset implementations over tensors already in memory, and subsets.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/shard_plan.h"
#include "worker/train/data/dataset.h"

namespace trainctl::train {

// Row i is (inputs[i], targets[i]). Gather is an index_select per tensor.
class TensorDataset : public Dataset {
 public:
  // Both tensors share dim 0; they are made contiguous once here. With an
  // input_scale, inputs are stored as they came (e.g. uint8 pixels, a
  // quarter of the memory and no conversion pass at load) and each
  // gathered batch is converted to float32 and multiplied by the scale.
  // `more`: further named inputs, each with the same dim 0 (Batch's
  // more_inputs).
  TensorDataset(torch::Tensor inputs, torch::Tensor targets,
                double input_scale = 0, NamedInputs more = {});
  int64_t size() const override { return inputs_.size(0); }
  Batch Gather(const std::vector<int64_t>& indices) const override;


 private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
  double input_scale_;
  NamedInputs more_;
};

// The rows of several sets (a sharded path's files), one after another:
// row i is row i - offset(s) of shard s, found by binary search. Gather
// reads each shard's rows with one Gather and puts them back in order.
class ConcatDataset : public Dataset {
 public:
  explicit ConcatDataset(std::vector<std::shared_ptr<const Dataset>> parts);
  int64_t size() const override { return ends_.empty() ? 0 : ends_.back(); }
  Batch Gather(const std::vector<int64_t>& indices) const override;

 private:
  std::vector<std::shared_ptr<const Dataset>> parts_;
  std::vector<int64_t> ends_;  // ends_[s]: rows in shards 0..s
};

// Rows `count` positions of `order` starting at `first`: row i is base row
// order.At(first + i). The eval_fraction split, with no index list.
class OrderedSubsetDataset : public Dataset {
 public:
  OrderedSubsetDataset(std::shared_ptr<const Dataset> base, EpochOrder order,
                       int64_t first, int64_t count);
  int64_t size() const override { return count_; }
  Batch Gather(const std::vector<int64_t>& indices) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  EpochOrder order_;
  int64_t first_;
  int64_t count_;
};

}  // namespace trainctl::train
