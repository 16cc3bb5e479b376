#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

namespace trainctl::train {

// Adam with decoupled weight decay (AdamW semantics, same formulas as
// torch::optim::AdamW without amsgrad) whose moments live in 8 bits:
// m with the signed and v with the unsigned block-wise map of
// blockwise_quant.h, one fp32 scale per `block_size` elements. Each step
// dequantizes both moments, updates them and the parameter in fp32, and
// requantizes; the fp32 copies are step-local temporaries, so persistent state
// is about 2 bytes per element instead of AdamW's 8.
struct Adam8bitOptions
    : public torch::optim::OptimizerCloneableOptions<Adam8bitOptions> {
  explicit Adam8bitOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  typedef std::tuple<double, double> betas_t;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 1e-2;
  TORCH_ARG(int64_t, block_size) = 2048;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct Adam8bitParamState
    : public torch::optim::OptimizerCloneableParamState<Adam8bitParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(torch::Tensor, exp_avg_codes);      // int8, numel
  TORCH_ARG(torch::Tensor, exp_avg_scales);     // fp32, one per block
  TORCH_ARG(torch::Tensor, exp_avg_sq_codes);   // uint8, numel
  TORCH_ARG(torch::Tensor, exp_avg_sq_scales);  // fp32, one per block
};

class Adam8bit : public torch::optim::Optimizer {
 public:
  explicit Adam8bit(std::vector<torch::optim::OptimizerParamGroup> groups,
                    Adam8bitOptions defaults = Adam8bitOptions());
  explicit Adam8bit(std::vector<torch::Tensor> params,
                    Adam8bitOptions defaults = Adam8bitOptions())
      : Adam8bit({torch::optim::OptimizerParamGroup(std::move(params))},
                 defaults) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

  // Bytes held in per-parameter state tensors (codes and scales).
  int64_t StateBytes() const;
};

}  // namespace trainctl::train
