#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace trainctl::train {

// Adafactor (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with
// Sublinear Memory Cost"). Per parameter X with gradient G at step t (1-based):
//
//   beta2_t = 1 - t^decay_rate                       (beta2_1 = 0)
//   rho_t   = relative_step ? min(1e-2, 1/sqrt(t)) : lr
//   alpha_t = scale_parameter ? max(eps2, RMS(X_{t-1})) * rho_t : rho_t
//   G2      = G*G + eps1                             (elementwise)
//   X with >= 2 dims, shape [..., n, m] (factored over the last two dims):
//     R_t   = beta2_t R_{t-1} + (1 - beta2_t) mean_j G2[..., i, j]    [..., n]
//     C_t   = beta2_t C_{t-1} + (1 - beta2_t) mean_i G2[..., i, j]    [..., m]
//     V_hat = R_t[i] * C_t[j] / mean_i R_t[i]
//   X with < 2 dims (unfactored):
//     V_hat = V_t = beta2_t V_{t-1} + (1 - beta2_t) G2
//   U       = G / sqrt(V_hat)
//   U      /= max(1, RMS(U) / clip_threshold)        (if clip_threshold > 0)
//   M_t     = beta1 M_{t-1} + (1 - beta1) U; U = M_t (if beta1 > 0, M_0 = 0)
//   X_t     = X_{t-1} - rho_t * weight_decay * X_{t-1} - alpha_t * U
//
// RMS(x) = sqrt(mean(x^2)). Means instead of the paper's sums give the same
// V_hat (the row/column counts cancel) without overflow on large matrices.
// Choices the paper leaves open: the first moment averages the clipped update
// before the step size is applied (so a schedule change acts at once), and
// weight decay is decoupled and scaled by rho_t, not alpha_t (so it does not
// depend on the parameter's RMS). With relative_step, lr (and so SetLr) has no
// effect.
//
// Persistent state per parameter: R and C (factored) or V (unfactored), plus
// M when beta1 > 0; all in the parameter's dtype and device.
struct AdafactorOptions
    : public torch::optim::OptimizerCloneableOptions<AdafactorOptions> {
  explicit AdafactorOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  TORCH_ARG(double, eps1) = 1e-30;
  TORCH_ARG(double, eps2) = 1e-3;
  TORCH_ARG(double, clip_threshold) = 1.0;
  TORCH_ARG(double, decay_rate) = -0.8;
  TORCH_ARG(double, beta1) = 0.0;
  TORCH_ARG(double, weight_decay) = 0.0;
  TORCH_ARG(bool, scale_parameter) = false;
  TORCH_ARG(bool, relative_step) = false;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct AdafactorParamState
    : public torch::optim::OptimizerCloneableParamState<AdafactorParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(torch::Tensor, row);      // R, factored only
  TORCH_ARG(torch::Tensor, col);      // C, factored only
  TORCH_ARG(torch::Tensor, exp_avg_sq);  // V, unfactored only
  TORCH_ARG(torch::Tensor, exp_avg);  // M, only when beta1 > 0
};

class Adafactor : public torch::optim::Optimizer {
 public:
  explicit Adafactor(std::vector<torch::optim::OptimizerParamGroup> groups,
                     AdafactorOptions defaults = AdafactorOptions());
  explicit Adafactor(std::vector<torch::Tensor> params,
                     AdafactorOptions defaults = AdafactorOptions())
      : Adafactor({torch::optim::OptimizerParamGroup(std::move(params))},
                  defaults) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

  // Bytes held in per-parameter state tensors.
  int64_t StateBytes() const;
};

}  // namespace trainctl::train
