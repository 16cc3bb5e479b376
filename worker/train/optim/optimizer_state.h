#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace trainctl::train {

// One parameter's optimizer state as plain named tensors, so a checkpoint
// holds it without torch's pointer-keyed state map and any process (of any
// world size) can load it. Tensors are copies on the CPU after a copying
// export.
struct ParamOptimizerState {
  bool present = false;  // false: the optimizer has no state for it yet
  int64_t step = 0;
  std::map<std::string, torch::Tensor> tensors;
};

// The state of every parameter of `params`, in order. Knows SGD, Adam,
// AdamW, Adafactor and Adam8bit (the optimizers BuildOptimizer makes).
// `copy`: copies in host memory; without, the live tensors themselves,
// where they are (a live transfer sends them at once).
std::vector<ParamOptimizerState> ExportOptimizerState(
    torch::optim::Optimizer& optimizer,
    const std::vector<torch::Tensor>& params, bool copy = true);

// Replaces the optimizer's state with `saved`, moving tensors to each
// parameter's device. INVALID_ARGUMENT when the count, a tensor name or a
// shape does not match (a checkpoint of another model or optimizer).
absl::Status ImportOptimizerState(torch::optim::Optimizer& optimizer,
                                  const std::vector<torch::Tensor>& params,
                                  const std::vector<ParamOptimizerState>& saved);

}  // namespace trainctl::train
