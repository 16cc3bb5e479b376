#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "common/vocabulary.h"
#include "worker/train/data/dataset.h"
#include "worker/train/grad_sync.h"
#include "worker/train/models/model.h"

namespace trainctl::train {

// The training loss of `task` (classification, language_model, regression),
// averaged over the batch (and over tokens for language models).
torch::Tensor TaskLoss(Task task, const torch::Tensor& outputs,
                       const torch::Tensor& targets);

struct EvalOptions {
  int top_k = 5;           // eval_top<k>_accuracy when below the class count; 0 = off
  bool per_class = false;  // per-class precision/recall/F1, the confusion matrix
};

// Evaluates `model` on this rank's contiguous, non-overlapping slice of
// `data` and combines the slices exactly across ranks (sums and counts are
// reduced, never means of means, and no sample is padded or repeated).
// Returns eval_loss; for classification eval_accuracy, eval_precision,
// eval_recall and eval_f1 (macro; eval_metrics.h), eval_top<k>_accuracy
// and with per_class eval_{precision,recall,f1}_<class>; for a language
// model eval_perplexity and eval_token_accuracy; eval_loss_min/_max, the
// lowest and highest loss of one rank's slice; and eval_ms with _min/_max,
// the time each rank spent. With per_class (and at most 64 classes) it
// fills `confusion` with the confusion matrix's text when given. One
// all-gather, two for classification; every rank must call it at the same
// point.
std::map<std::string, double> Evaluate(Model& model, const Dataset& data,
                                       Task task, int rank,
                                       int world_size, int64_t batch_size,
                                       const torch::Device& device,
                                       RankCollectives& sync,
                                       const EvalOptions& options = {},
                                       std::vector<std::string>* confusion = nullptr);

}  // namespace trainctl::train
