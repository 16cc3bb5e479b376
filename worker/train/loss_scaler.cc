#include "worker/train/loss_scaler.h"

#include "worker/train/torch_compat.h"

namespace trainctl::train {
namespace {

constexpr double kGrowth = 2.0;
constexpr double kBackoff = 0.5;

}  // namespace

DynamicLossScaler::DynamicLossScaler(double initial_scale, int growth_interval,
                                     torch::Device device)
    : growth_interval_(growth_interval),
      scale_(torch::full({1}, initial_scale,
                         torch::dtype(torch::kFloat32).device(device))),
      growth_tracker_(torch::zeros({1}, torch::dtype(torch::kInt32).device(device))),
      found_inf_(torch::zeros({1}, torch::dtype(torch::kFloat32).device(device))) {}

double DynamicLossScaler::scale() const { return scale_.item<double>(); }

bool DynamicLossScaler::Unscale(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  found_inf_.zero_();
  const torch::Tensor inv_scale = scale_.reciprocal();
  if (scale_.is_cuda() || kAmpKernelsOnCpu) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  } else {
    // Debian's 1.13 has the fused kernel for CUDA only; the same on the
    // CPU in tensor operations, still without a copy to the host per
    // gradient.
    for (auto& g : grads) {
      g.mul_(inv_scale);
      found_inf_.add_(g.isfinite().logical_not().any());
    }
    found_inf_.clamp_max_(1);
  }
  return found_inf_.item<float>() == 0;
}

void DynamicLossScaler::Update(bool finite) {
  torch::NoGradGuard no_grad;
  if (!finite) ++skipped_;
  found_inf_.fill_(finite ? 0.0 : 1.0);
  if (scale_.is_cuda() || kAmpKernelsOnCpu) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, kGrowth,
                           kBackoff, growth_interval_);
    return;
  }
  const torch::Tensor found = found_inf_ > 0;
  growth_tracker_.copy_(torch::where(found, torch::zeros_like(growth_tracker_),
                                     growth_tracker_ + 1));
  const torch::Tensor grow = growth_tracker_ >= growth_interval_;
  scale_.copy_(torch::where(found, scale_ * kBackoff,
                            torch::where(grow, scale_ * kGrowth, scale_)));
  growth_tracker_.masked_fill_(grow, 0);
}

DynamicLossScaler::State DynamicLossScaler::Save() const {
  return {scale(), growth_tracker_.item<int>(), skipped_};
}

void DynamicLossScaler::Restore(const State& state) {
  scale_.fill_(state.scale);
  growth_tracker_.fill_(state.good_steps);
  skipped_ = state.skipped;
}

}  // namespace trainctl::train
