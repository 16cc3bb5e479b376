#include "worker/train/optim/adafactor.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "worker/train/torch_compat.h"

namespace trainctl::train {
namespace {

// sqrt(mean(x^2)) as a 0-dim tensor, so the step never syncs with a device.
torch::Tensor Rms(const torch::Tensor& x) {
  return x.norm() / std::sqrt(static_cast<double>(std::max<int64_t>(1, x.numel())));
}

int64_t TensorBytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

}  // namespace

Adafactor::Adafactor(std::vector<torch::optim::OptimizerParamGroup> groups,
                     AdafactorOptions defaults)
    : Optimizer(std::move(groups),
                std::make_unique<AdafactorOptions>(defaults)) {
  TORCH_CHECK(defaults.lr() >= 0, "Adafactor: invalid lr ", defaults.lr());
  TORCH_CHECK(defaults.eps1() >= 0 && defaults.eps2() >= 0,
              "Adafactor: eps must be >= 0");
  TORCH_CHECK(defaults.beta1() >= 0 && defaults.beta1() < 1,
              "Adafactor: beta1 must be in [0, 1)");
  TORCH_CHECK(defaults.decay_rate() <= 0, "Adafactor: decay_rate must be <= 0");
  TORCH_CHECK(defaults.weight_decay() >= 0,
              "Adafactor: weight_decay must be >= 0");
}

torch::Tensor Adafactor::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdafactorOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& g = p.grad();
      TORCH_CHECK(!g.is_sparse(), "Adafactor does not support sparse gradients");
      const bool factored = p.dim() >= 2;

      const OptimizerStateKey key = StateKeyOf(p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto s = std::make_unique<AdafactorParamState>();
        if (factored) {
          s->row(torch::zeros(p.sizes().slice(0, p.dim() - 1), p.options()));
          std::vector<int64_t> col_shape(p.sizes().begin(), p.sizes().end());
          col_shape.erase(col_shape.end() - 2);
          s->col(torch::zeros(col_shape, p.options()));
        } else {
          s->exp_avg_sq(torch::zeros_like(p));
        }
        if (o.beta1() > 0) s->exp_avg(torch::zeros_like(p));
        it = state_.emplace(key, std::move(s)).first;
      }
      auto& s = static_cast<AdafactorParamState&>(*it->second);
      s.step(s.step() + 1);
      const double t = static_cast<double>(s.step());
      const double beta2 = 1.0 - std::pow(t, o.decay_rate());
      const double rho =
          o.relative_step() ? std::min(1e-2, 1.0 / std::sqrt(t)) : o.lr();

      torch::Tensor g2 = g * g + o.eps1();
      torch::Tensor update;
      if (factored) {
        s.row().mul_(beta2).add_(g2.mean(-1), 1.0 - beta2);
        s.col().mul_(beta2).add_(g2.mean(-2), 1.0 - beta2);
        g2.reset();  // Free the full-size temporary early.
        // 1/sqrt(V_hat) = rsqrt(R / mean(R)) * rsqrt(C), broadcast to [.., n, m].
        torch::Tensor row_factor =
            (s.row() / s.row().mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
        torch::Tensor col_factor = s.col().rsqrt().unsqueeze(-2);
        update = g * row_factor * col_factor;
      } else {
        s.exp_avg_sq().mul_(beta2).add_(g2, 1.0 - beta2);
        update = g * s.exp_avg_sq().rsqrt();
      }
      if (o.clip_threshold() > 0) {
        update.div_((Rms(update) / o.clip_threshold()).clamp_min_(1.0));
      }
      if (o.beta1() > 0) {
        s.exp_avg().mul_(o.beta1()).add_(update, 1.0 - o.beta1());
        update = s.exp_avg();
      }
      // alpha_t uses RMS(X_{t-1}), so take it before weight decay changes X.
      torch::Tensor alpha;
      if (o.scale_parameter()) alpha = Rms(p).clamp_min_(o.eps2()) * rho;
      if (o.weight_decay() > 0) p.mul_(1.0 - rho * o.weight_decay());
      if (alpha.defined()) {
        p.sub_(update * alpha);
      } else {
        p.sub_(update, rho);
      }
    }
  }
  return loss;
}

int64_t Adafactor::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& [key, state] : state_) {
    const auto& s = static_cast<const AdafactorParamState&>(*state);
    bytes += TensorBytes(s.row()) + TensorBytes(s.col()) +
             TensorBytes(s.exp_avg_sq()) + TensorBytes(s.exp_avg());
  }
  return bytes;
}

}  // namespace trainctl::train
