#include "worker/train/models/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>

namespace trainctl::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class CheckpointFunction
    : public torch::autograd::Function<CheckpointFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor input,
                               int64_t block_address) {
    // Autograd saved data holds IValues; the block lives in its module.
    ctx->saved_data["block"] = block_address;
    ctx->saved_data["rng"] = at::detail::getDefaultCPUGenerator().get_state();
    ctx->save_for_backward({input});
    return (*reinterpret_cast<const BlockFn*>(block_address))(input);
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    const auto* block =
        reinterpret_cast<const BlockFn*>(ctx->saved_data["block"].toInt());
    torch::Tensor input = ctx->get_saved_variables()[0];
    torch::Tensor replay_input = input.detach().requires_grad_(true);
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    torch::Tensor rng_now = generator.get_state();
    generator.set_state(ctx->saved_data["rng"].toTensor());
    torch::Tensor output;
    {
      torch::AutoGradMode enable(true);
      output = (*block)(replay_input);
    }
    generator.set_state(rng_now);
    torch::autograd::backward({output}, {grad_outputs[0]});
    return {replay_input.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor CheckpointBlock(const BlockFn& block, const torch::Tensor& input) {
  // Without an input that requires grad, autograd would never call backward
  // and the block's parameters would get no gradient.
  torch::Tensor x = input.requires_grad() ? input
                                          : input.detach().requires_grad_(true);
  return CheckpointFunction::apply(
      x, static_cast<int64_t>(reinterpret_cast<intptr_t>(&block)));
}

}  // namespace trainctl::train
