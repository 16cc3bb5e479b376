#include "worker/train/models/activation_checkpoint.h"

#include <cstdint>

#include "worker/train/autocast_scope.h"
#include "worker/train/device.h"

namespace trainctl::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class CheckpointFunction
    : public torch::autograd::Function<CheckpointFunction> {
 public:
  // `aux_address`: the caller's aux tensor, read here only (an undefined
  // tensor cannot be an argument of apply in LibTorch 1.13).
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor input,
                               int64_t aux_address, int64_t block_address) {
    // Autograd saved data holds IValues; the block lives in its module.
    ctx->saved_data["block"] = block_address;
    const torch::Tensor& aux = *reinterpret_cast<const torch::Tensor*>(aux_address);
    if (aux.defined()) ctx->saved_data["aux"] = aux;
    // The recompute must draw the same dropout masks (from the CPU's and,
    // on a GPU, the device's generator) and run under the same autocast.
    const torch::Device device = input.device();
    ctx->saved_data["rng_cpu"] = GeneratorState(torch::kCPU);
    if (!device.is_cpu()) ctx->saved_data["rng_device"] = GeneratorState(device);
    const AutocastState autocast = GetAutocast(device.type());
    ctx->saved_data["autocast"] = autocast.enabled;
    ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(autocast.dtype);
    ctx->save_for_backward({input});
    return (*reinterpret_cast<const BlockFn*>(block_address))(input, aux);
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    const auto* block =
        reinterpret_cast<const BlockFn*>(ctx->saved_data["block"].toInt());
    torch::Tensor input = ctx->get_saved_variables()[0];
    const auto aux = ctx->saved_data.find("aux");
    const torch::Tensor mask =
        aux == ctx->saved_data.end() ? torch::Tensor() : aux->second.toTensor();
    torch::Tensor replay_input = input.detach().requires_grad_(true);
    const torch::Device device = input.device();
    const bool on_device = !device.is_cpu();
    const torch::Tensor cpu_now = GeneratorState(torch::kCPU);
    const torch::Tensor device_now = on_device ? GeneratorState(device) : torch::Tensor();
    SetGeneratorState(torch::kCPU, ctx->saved_data["rng_cpu"].toTensor());
    if (on_device) SetGeneratorState(device, ctx->saved_data["rng_device"].toTensor());
    torch::Tensor output;
    {
      torch::AutoGradMode enable(true);
      AutocastScope autocast(
          AutocastState{ctx->saved_data["autocast"].toBool(),
                        static_cast<at::ScalarType>(
                            ctx->saved_data["autocast_dtype"].toInt())},
          device.type());
      output = (*block)(replay_input, mask);
    }
    SetGeneratorState(torch::kCPU, cpu_now);
    if (on_device) SetGeneratorState(device, device_now);
    torch::autograd::backward({output}, {grad_outputs[0]});
    return {replay_input.grad(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor CheckpointBlock(const BlockFn& block, const torch::Tensor& input,
                              const torch::Tensor& aux) {
  // Without an input that requires grad, autograd would never call backward
  // and the block's parameters would get no gradient.
  torch::Tensor x = input.requires_grad() ? input
                                          : input.detach().requires_grad_(true);
  return CheckpointFunction::apply(
      x, static_cast<int64_t>(reinterpret_cast<intptr_t>(&aux)),
      static_cast<int64_t>(reinterpret_cast<intptr_t>(&block)));
}

}  // namespace trainctl::train
