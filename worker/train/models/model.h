#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/train/data/dataset.h"

namespace trainctl::train {

// A trainable model, built-in or TorchScript. The forward contract, for
// every model: Forward(inputs [B, ...], more) returns
//   classification:  logits [B, num_classes]
//   language_model:  logits [B, T, vocab_size] for token inputs [B, T]
//   regression:      predictions [B] or [B, k]
// `more` holds the data's named inputs besides the first (dataset.h), e.g.
// the attention_mask of padded token ids; empty for data with one input.
// Not thread-safe; one per rank.
class Model {
 public:
  virtual ~Model() = default;
  torch::Tensor Forward(const torch::Tensor& inputs) { return Forward(inputs, {}); }
  virtual torch::Tensor Forward(const torch::Tensor& inputs,
                                const NamedInputs& more) = 0;
  // Trainable parameters, in a fixed order that is the same on every rank.
  virtual std::vector<torch::Tensor> Parameters() = 0;
  // Parameters and buffers by name (for checkpoints and comparisons).
  virtual std::vector<std::pair<std::string, torch::Tensor>> NamedState() = 0;
  virtual void SetTraining(bool training) = 0;
  virtual void To(const torch::Device& device) = 0;
  // A TorchScript module may define its own training loss,
  //   def loss(self, inputs, targets) -> Tensor   (a scalar)
  // (with named inputs: each by its name, then the targets), which training
  // then uses instead of the task's (distillation from a frozen teacher,
  // contrastive losses); evaluation still scores Forward.
  virtual bool HasCustomLoss() const { return false; }
  virtual torch::Tensor CustomLoss(const torch::Tensor& inputs,
                                   const NamedInputs& more,
                                   const torch::Tensor& targets) {
    return {};
  }
};

// Builds the model the spec names, sized from the spec and the data
// (input shape, classes, vocabulary). Parameters come from torch's default
// initialisation under the current torch seed. INVALID_ARGUMENT naming the
// spec field when the model does not fit the data (torchscript_model.h: a
// module's forward and loss against the data's inputs).
absl::StatusOr<std::unique_ptr<Model>> BuildModel(const v1::JobSpec& spec,
                                                  const DataInfo& data);

}  // namespace trainctl::train
