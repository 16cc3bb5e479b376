#include "worker/train/optim/adam8bit.h"

#include <cmath>
#include <utility>

#include "worker/train/optim/blockwise_quant.h"
#include "worker/train/torch_compat.h"

namespace trainctl::train {
namespace {

int64_t TensorBytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

// Distinct rounding noise per (parameter, step, moment).
uint64_t RoundingSeed(int64_t param_index, int64_t step, int moment) {
  return (static_cast<uint64_t>(param_index) << 40) ^
         (static_cast<uint64_t>(step) << 1) ^ static_cast<uint64_t>(moment);
}

}  // namespace

Adam8bit::Adam8bit(std::vector<torch::optim::OptimizerParamGroup> groups,
                   Adam8bitOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<Adam8bitOptions>(defaults)) {
  const auto [beta1, beta2] = defaults.betas();
  TORCH_CHECK(defaults.lr() >= 0, "Adam8bit: invalid lr ", defaults.lr());
  TORCH_CHECK(defaults.eps() >= 0, "Adam8bit: invalid eps ", defaults.eps());
  TORCH_CHECK(beta1 >= 0 && beta1 < 1, "Adam8bit: beta1 must be in [0, 1)");
  TORCH_CHECK(beta2 >= 0 && beta2 < 1, "Adam8bit: beta2 must be in [0, 1)");
  TORCH_CHECK(defaults.weight_decay() >= 0, "Adam8bit: invalid weight_decay");
  TORCH_CHECK(defaults.block_size() > 0, "Adam8bit: block_size must be > 0");
}

torch::Tensor Adam8bit::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  int64_t param_index = -1;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const Adam8bitOptions&>(group.options());
    const auto [beta1, beta2] = o.betas();
    const int64_t block = o.block_size();
    for (auto& p : group.params()) {
      ++param_index;
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(),
                  "Adam8bit does not support sparse gradients");
      torch::Tensor g = p.grad().reshape(-1).to(torch::kFloat32);

      const OptimizerStateKey key = StateKeyOf(p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        it = state_.emplace(key, std::make_unique<Adam8bitParamState>()).first;
      }
      auto& s = static_cast<Adam8bitParamState&>(*it->second);
      torch::Tensor m;
      torch::Tensor v;
      if (s.step() == 0) {
        m = torch::zeros_like(g);
        v = torch::zeros_like(g);
      } else {
        m = DequantizeBlockwise({s.exp_avg_codes(), s.exp_avg_scales()}, block,
                                /*is_signed=*/true);
        v = DequantizeBlockwise({s.exp_avg_sq_codes(), s.exp_avg_sq_scales()},
                                block, /*is_signed=*/false);
      }
      s.step(s.step() + 1);
      const double t = static_cast<double>(s.step());

      m.mul_(beta1).add_(g, 1.0 - beta1);
      v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
      const double bias1 = 1.0 - std::pow(beta1, t);
      const double bias2 = 1.0 - std::pow(beta2, t);
      torch::Tensor denom = (v.sqrt() / std::sqrt(bias2)).add_(o.eps());
      torch::Tensor update = (m / denom).mul_(o.lr() / bias1);

      if (o.weight_decay() > 0) p.mul_(1.0 - o.lr() * o.weight_decay());
      p.sub_(update.view(p.sizes()).to(p.scalar_type()));

      QuantizedState qm = QuantizeBlockwise(
          m, block, /*is_signed=*/true, RoundingSeed(param_index, s.step(), 0));
      QuantizedState qv = QuantizeBlockwise(
          v, block, /*is_signed=*/false, RoundingSeed(param_index, s.step(), 1));
      s.exp_avg_codes(qm.codes);
      s.exp_avg_scales(qm.scales);
      s.exp_avg_sq_codes(qv.codes);
      s.exp_avg_sq_scales(qv.scales);
    }
  }
  return loss;
}

int64_t Adam8bit::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& [key, state] : state_) {
    const auto& s = static_cast<const Adam8bitParamState&>(*state);
    bytes += TensorBytes(s.exp_avg_codes()) + TensorBytes(s.exp_avg_scales()) +
             TensorBytes(s.exp_avg_sq_codes()) +
             TensorBytes(s.exp_avg_sq_scales());
  }
  return bytes;
}

}  // namespace trainctl::train
