#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "trainctl/v1/spec.pb.h"

namespace trainctl::train {

// Learning rate at `step` (0-based) of a run of `total_steps` steps, so the
// last step is L = total_steps - 1. With W = warmup_steps:
//   warm-up (step < W, every type): base_lr * (step + 1) / W, reaching base_lr
//     on step W - 1;
//   afterwards progress p = (step - W) / (L - W), clamped to [0, 1]: 0 on
//     the first step after warm-up, exactly 1 on the last step;
//   constant: base_lr;
//   linear:   base_lr * (1 - p), so exactly 0 on the last step;
//   cosine:   min_lr + (base_lr - min_lr) * 0.5 * (1 + cos(pi * p)), so exactly
//     min_lr on the last step.
// When no decay phase is left (L <= W) p is 0: the run holds base_lr rather
// than spend its only post-warm-up step at 0. Steps past L keep p = 1.
double ScheduledLr(const v1::SchedulerSpec& spec, double base_lr, int64_t step,
                   int64_t total_steps);

// Sets the learning rate of every param group of `optimizer`.
void SetLr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace trainctl::train
