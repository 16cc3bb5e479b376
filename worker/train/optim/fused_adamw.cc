#include "worker/train/optim/fused_adamw.h"

#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace trainctl::train {
namespace {

// One kernel call's lists: the kernel takes tensors of one device and dtype.
struct FusedLists {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
};

}  // namespace

torch::Tensor FusedAdamW::step(LossClosure closure) {
  bool amsgrad = false;
  for (const auto& group : param_groups()) {
    amsgrad |= static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad();
  }
  if (!kFusedAdamW || amsgrad) return torch::optim::AdamW::step(std::move(closure));

  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    // Keyed by device type, index and dtype: no string built per parameter.
    std::map<std::tuple<int, int, int>, FusedLists> lists;
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      const OptimizerStateKey key = StateKeyOf(param);
      auto found = state_.find(key);
      if (found == state_.end()) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(param, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(param, at::MemoryFormat::Preserve));
        found = state_.emplace(key, std::move(fresh)).first;
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*found->second);
      DeviceStep& device_step = device_steps_[key];
      if (device_step.step != state.step() || !device_step.count.defined() ||
          device_step.count.device() != param.device()) {
        device_step.count = torch::full(
            {}, static_cast<double>(state.step()),
            torch::dtype(torch::kFloat32).device(param.device()));
      }
      state.step(state.step() + 1);
      device_step.step = state.step();
      FusedLists& l = lists[{static_cast<int>(param.device().type()),
                             param.device().index(),
                             static_cast<int>(param.scalar_type())}];
      l.params.push_back(param);
      l.grads.push_back(param.grad());
      l.exp_avgs.push_back(state.exp_avg());
      l.exp_avg_sqs.push_back(state.exp_avg_sq());
      l.steps.push_back(device_step.count);
    }
    const auto [beta1, beta2] = options.betas();
    for (auto& [where, l] : lists) {
      // As torch.optim's fused AdamW: the counts go up first, on the device.
      torch::_foreach_add_(l.steps, 1);
      FusedAdamWUpdate(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, l.steps,
                       options.lr(), beta1, beta2, options.weight_decay(),
                       options.eps());
    }
  }
  return loss;
}

}  // namespace trainctl::train
