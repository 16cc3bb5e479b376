#include "worker/train/loss_scaler.h"

#include <algorithm>

namespace trainctl::train {

bool DynamicLossScaler::Unscale(const std::vector<torch::Tensor>& params) const {
  torch::NoGradGuard no_grad;
  bool finite = true;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    p.grad().mul_(1.0 / scale_);
    finite = finite && torch::isfinite(p.grad()).all().item<bool>();
  }
  return finite;
}

void DynamicLossScaler::Update(bool finite) {
  if (!finite) {
    scale_ = std::max(1.0, scale_ / 2);
    good_steps_ = 0;
    ++skipped_;
    return;
  }
  if (++good_steps_ >= growth_interval_) {
    scale_ *= 2;
    good_steps_ = 0;
  }
}

}  // namespace trainctl::train
