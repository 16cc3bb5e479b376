#pragma once

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl::train {

// Builds the model a spec names. Its forward takes a batch of inputs
// [B, ...] and returns logits [B, num_classes]. Parameters come from
// torch's default initialisation under the current torch seed.
absl::StatusOr<torch::nn::Sequential> BuildModel(const v1::ModelSpec& spec,
                                                 int64_t input_features,
                                                 int64_t num_classes);

}  // namespace trainctl::train
