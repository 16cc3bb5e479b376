#pragma once

#include <torch/torch.h>

#include <vector>

namespace trainctl::train {

// Dynamic loss scaling for fp16 training (as CUDA's GradScaler does): the
// loss is multiplied by scale_tensor() before backward so small gradients
// survive fp16; Unscale divides the gradients back and reports whether all
// are finite. On a non-finite step the caller skips the optimizer step and
// the scale halves; after `growth_interval` finite steps in a row it
// doubles.
//
// The scale and the streak live on the gradients' device and are updated
// there by torch's fused AMP kernels (one launch for all gradients): a step
// costs one device-to-host copy, the finite flag, instead of one per
// parameter. scale() and Save() read the device values (for logs and
// checkpoints only). Not thread-safe.
class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(double initial_scale = 65536.0,
                             int growth_interval = 2000,
                             torch::Device device = torch::kCPU);

  // What the loss is multiplied by (a one-element tensor on the device).
  const torch::Tensor& scale_tensor() const { return scale_; }
  double scale() const;
  // Divides every defined gradient by the scale; true when all are finite.
  bool Unscale(const std::vector<torch::Tensor>& params);
  // Records the step's outcome and adjusts the scale.
  void Update(bool finite);
  int64_t skipped_steps() const { return skipped_; }

  // What a checkpoint keeps of it.
  struct State {
    double scale = 0;
    int good_steps = 0;
    int64_t skipped = 0;
  };
  State Save() const;
  void Restore(const State& state);

 private:
  int growth_interval_;
  torch::Tensor scale_;           // float32 [1]
  torch::Tensor growth_tracker_;  // int32 [1]: finite steps in a row
  torch::Tensor found_inf_;       // float32 [1]
  int64_t skipped_ = 0;
};

}  // namespace trainctl::train
