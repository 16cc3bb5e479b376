#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "trainctl/v1/spec.pb.h"

namespace trainctl::train {

// The optimizer a spec names, over `params`.
std::unique_ptr<torch::optim::Optimizer> BuildOptimizer(
    const v1::OptimizerSpec& spec, const std::vector<torch::Tensor>& params);

// Learning rate at `step` (0-based) of `total_steps`:
//   constant: base_lr after a linear warm-up over warmup_steps;
//   linear:   linear warm-up to base_lr, then linear decay to 0 at the end.
double ScheduledLr(const v1::SchedulerSpec& spec, double base_lr, int64_t step,
                   int64_t total_steps);

void SetLr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace trainctl::train
