#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

namespace trainctl::train {

// Adam with decoupled weight decay (AdamW semantics, same formulas as
// torch::optim::AdamW without amsgrad) whose moments live in 8 bits, as
// Dettmers et al. publish it: m with the signed and v with the unsigned
// dynamic tree map of blockwise_quant.h, one fp32 absmax per `block_size`
// elements (2048 by default, as in the paper). Tensors under
// `min_8bit_size` elements (biases, norms) keep fp32 moments, as
// bitsandbytes does by default: there 8 bits save little and cost accuracy.
//
// The step is fused per block: on CPU one pass per block dequantizes both
// moments, updates them and the parameter, finds the new absmax and
// requantizes, with nothing larger than one block held in fp32; on other
// devices the same runs as tensor operations over chunks of blocks, so no
// temporary is the size of the parameter either way.
struct Adam8bitOptions
    : public torch::optim::OptimizerCloneableOptions<Adam8bitOptions> {
  explicit Adam8bitOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  typedef std::tuple<double, double> betas_t;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 1e-2;
  TORCH_ARG(int64_t, block_size) = 2048;
  TORCH_ARG(int64_t, min_8bit_size) = 4096;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct Adam8bitParamState
    : public torch::optim::OptimizerCloneableParamState<Adam8bitParamState> {
  TORCH_ARG(int64_t, step) = 0;
  // 8-bit moments (tensors of at least min_8bit_size elements).
  TORCH_ARG(torch::Tensor, exp_avg_code);      // uint8, numel: signed map
  TORCH_ARG(torch::Tensor, exp_avg_absmax);    // fp32, one per block
  TORCH_ARG(torch::Tensor, exp_avg_sq_code);   // uint8, numel: unsigned map
  TORCH_ARG(torch::Tensor, exp_avg_sq_absmax); // fp32, one per block
  // fp32 moments (smaller tensors).
  TORCH_ARG(torch::Tensor, exp_avg);
  TORCH_ARG(torch::Tensor, exp_avg_sq);
  // A checkpoint of trainctl before the published maps: decoded and
  // requantized at the first step (blockwise_quant.h).
  TORCH_ARG(torch::Tensor, exp_avg_codes);
  TORCH_ARG(torch::Tensor, exp_avg_scales);
  TORCH_ARG(torch::Tensor, exp_avg_sq_codes);
  TORCH_ARG(torch::Tensor, exp_avg_sq_scales);
};

// One step of the 8-bit state of one parameter (already incremented
// `state.step()`), on CPU fused per block unless `chunked` (the path of
// other devices, also for tests).
struct Adam8bitStepArgs {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t block_size;
  bool chunked = false;
};
void Adam8bitBlockwiseStep(torch::Tensor& param, const torch::Tensor& grad,
                           Adam8bitParamState& state, const Adam8bitStepArgs& args);

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
