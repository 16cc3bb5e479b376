#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "trainctl/v1/spec.pb.h"
#include "worker/train/optim/adafactor.h"
#include "worker/train/optim/adam8bit.h"

namespace trainctl::train {

// The optimizer a spec names, over `params`:
//   sgd       torch::optim::SGD (lr, momentum, nesterov, weight_decay)
//   adam      torch::optim::Adam (lr, betas, eps, L2 weight_decay)
//   adamw     torch::optim::AdamW (lr, betas, eps, decoupled weight_decay);
//             FusedAdamW, the same update in one kernel, on CUDA (2.x)
//   adafactor Adafactor (betas[0] is beta1; eps is eps1; see adafactor.h)
//   adam8bit  Adam8bit (AdamW with 8-bit block-wise state; see adam8bit.h)
// An empty type means adamw; the spec is expected to be validated already
// (common/spec.cc), so an unknown type throws std::invalid_argument.
std::unique_ptr<torch::optim::Optimizer> BuildOptimizer(
    const v1::OptimizerSpec& spec, const std::vector<torch::Tensor>& params);

// Bytes held in the optimizer's per-parameter state tensors, for SGD, Adam,
// AdamW, Adafactor and Adam8bit (0 for state of any other optimizer).
int64_t OptimizerStateBytes(const torch::optim::Optimizer& optimizer);

}  // namespace trainctl::train
