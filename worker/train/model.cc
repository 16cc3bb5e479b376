#include "worker/train/model.h"

#include "absl/strings/str_cat.h"

namespace trainctl::train {

absl::StatusOr<torch::nn::Sequential> BuildModel(const v1::ModelSpec& spec,
                                                 int64_t input_features,
                                                 int64_t num_classes) {
  if (spec.type() != "mlp") {
    return absl::InvalidArgumentError(
        absl::StrCat("model.type: unknown model '", spec.type(), "'"));
  }
  torch::nn::Sequential net;
  net->push_back(torch::nn::Flatten());
  int64_t width = input_features;
  for (int hidden : spec.hidden()) {
    net->push_back(torch::nn::Linear(width, hidden));
    net->push_back(torch::nn::ReLU());
    width = hidden;
  }
  net->push_back(torch::nn::Linear(width, num_classes));
  return net;
}

}  // namespace trainctl::train
