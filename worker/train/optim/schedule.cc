#include "worker/train/optim/schedule.h"

#include <algorithm>
#include <cmath>

namespace trainctl::train {

double ScheduledLr(const v1::SchedulerSpec& spec, double base_lr, int64_t step,
                   int64_t total_steps) {
  const int64_t warmup = std::max<int64_t>(0, spec.warmup_steps());
  if (step < warmup) {
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  const int64_t last = total_steps - 1;
  double progress = 0.0;
  if (last > warmup) {
    progress = std::clamp(static_cast<double>(step - warmup) /
                              static_cast<double>(last - warmup),
                          0.0, 1.0);
  }
  if (spec.type() == "linear") return base_lr * (1.0 - progress);
  if (spec.type() == "cosine") {
    const double min_lr = spec.min_lr();
    return min_lr +
           (base_lr - min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return base_lr;
}

void SetLr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace trainctl::train
