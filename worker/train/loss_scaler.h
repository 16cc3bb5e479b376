#pragma once

#include <torch/torch.h>

#include <vector>

namespace trainctl::train {

// Dynamic loss scaling for fp16 training (as CUDA's GradScaler does): the
// loss is multiplied by scale() before backward so small gradients survive
// fp16; Unscale divides the gradients back and reports whether all are
// finite. Update skips nothing itself: on a non-finite step the caller skips
// the optimizer step, and the scale halves; after `growth_interval` finite
// steps in a row it doubles. Not thread-safe.
class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(double initial_scale = 65536.0,
                             int growth_interval = 2000)
      : scale_(initial_scale), growth_interval_(growth_interval) {}

  double scale() const { return scale_; }
  // Divides every defined gradient by the scale; true when all are finite.
  bool Unscale(const std::vector<torch::Tensor>& params) const;
  // Records the step's outcome and adjusts the scale.
  void Update(bool finite);
  int64_t skipped_steps() const { return skipped_; }

  // What a checkpoint keeps of it.
  struct State {
    double scale = 0;
    int good_steps = 0;
    int64_t skipped = 0;
  };
  State Save() const { return {scale_, good_steps_, skipped_}; }
  void Restore(const State& state) {
    scale_ = state.scale;
    good_steps_ = state.good_steps;
    skipped_ = state.skipped;
  }

 private:
  double scale_;
  int growth_interval_;
  int good_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace trainctl::train
