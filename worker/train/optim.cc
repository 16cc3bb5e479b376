#include "worker/train/optim.h"

#include <algorithm>

namespace trainctl::train {

std::unique_ptr<torch::optim::Optimizer> BuildOptimizer(
    const v1::OptimizerSpec& spec, const std::vector<torch::Tensor>& params) {
  if (spec.type() == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(spec.lr())
                    .momentum(spec.momentum())
                    .weight_decay(spec.weight_decay()));
  }
  if (spec.type() == "adam") {
    return std::make_unique<torch::optim::Adam>(
        params, torch::optim::AdamOptions(spec.lr())
                    .betas({spec.betas(0), spec.betas(1)})
                    .eps(spec.eps())
                    .weight_decay(spec.weight_decay()));
  }
  return std::make_unique<torch::optim::AdamW>(
      params, torch::optim::AdamWOptions(spec.lr())
                  .betas({spec.betas(0), spec.betas(1)})
                  .eps(spec.eps())
                  .weight_decay(spec.weight_decay()));
}

double ScheduledLr(const v1::SchedulerSpec& spec, double base_lr, int64_t step,
                   int64_t total_steps) {
  const int64_t warmup = spec.warmup_steps();
  if (warmup > 0 && step < warmup) {
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  if (spec.type() == "linear") {
    const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup);
    const double remaining =
        static_cast<double>(total_steps - step) / static_cast<double>(decay_steps);
    return base_lr * std::clamp(remaining, 0.0, 1.0);
  }
  return base_lr;
}

void SetLr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace trainctl::train
