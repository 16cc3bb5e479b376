#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <unordered_map>

#include "worker/train/torch_compat.h"

namespace trainctl::train {

// AdamW whose update is torch's fused kernel (torch_compat.h: LibTorch 2.x)
// with one launch per device and dtype a step, where torch::optim::AdamW
// launches about ten kernels per parameter. On a GPU those launches, not the
// arithmetic, were most of the gap to PyTorch's fused AdamW (docs/gpu.md).
// Same options, state (AdamWParamState), checkpoints and update as
// torch::optim::AdamW, to float rounding; with amsgrad, or on a LibTorch
// without the kernel, it is torch::optim::AdamW.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  // The kernel reads each parameter's step count as a float tensor on the
  // parameter's device. Kept beside the state's own count, and made again
  // from it when the two differ (after a checkpoint was loaded).
  struct DeviceStep {
    torch::Tensor count;
    int64_t step = -1;
  };
  std::unordered_map<OptimizerStateKey, DeviceStep> device_steps_;
};

}  // namespace trainctl::train
