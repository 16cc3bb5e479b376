#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "worker/train/data/dataset.h"
#include "worker/train/grad_sync.h"
#include "worker/train/models/model.h"

namespace trainctl::train {

// The training loss of `task` (classification, language_model, regression),
// averaged over the batch (and over tokens for language models).
torch::Tensor TaskLoss(const std::string& task, const torch::Tensor& outputs,
                       const torch::Tensor& targets);

// Evaluates `model` on this rank's contiguous, non-overlapping slice of
// `data` and combines the slices exactly across ranks (sums and counts are
// reduced, never means of means, and no sample is padded or repeated).
// Returns eval_loss plus eval_accuracy (classification) or eval_perplexity
// (language_model); eval_loss_min/_max, the lowest and highest loss of one
// rank's slice; and eval_ms with _min/_max, the time each rank spent. One
// all-gather; every rank must call it at the same point.
std::map<std::string, double> Evaluate(Model& model, const Dataset& data,
                                       const std::string& task, int rank,
                                       int world_size, int64_t batch_size,
                                       const torch::Device& device,
                                       RankCollectives& sync);

}  // namespace trainctl::train
