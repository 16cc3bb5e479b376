#include "worker/train/models/networks.h"

#include <cmath>

#include "worker/train/torch_compat.h"

namespace trainctl::train {

namespace F = torch::nn::functional;

namespace {

// ATen's linear, not the C++ frontend's Linear::forward: for a [B, T, C]
// input the frontend runs matmul and then adds the bias in a separate
// broadcast kernel, while ATen flattens it to one addmm whose bias rides in
// the GEMM's epilogue. On an H200 that separate add cost a GPT of 12 layers
// (d_model 1024) 5.1 ms of a 38 ms step (bench/gpu_check.sh's traces).
torch::Tensor Dense(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return at::linear(x, layer->weight, layer->bias);
}

}  // namespace

MlpImpl::MlpImpl(int64_t in_features, const std::vector<int64_t>& hidden,
                 int64_t out_features, bool checkpointing)
    : checkpointing_(checkpointing) {
  int64_t width = in_features;
  for (size_t i = 0; i < hidden.size(); ++i) {
    layers_.push_back(register_module("fc" + std::to_string(i),
                                      torch::nn::Linear(width, hidden[i])));
    width = hidden[i];
  }
  head_ = register_module("head", torch::nn::Linear(width, out_features));
  for (auto& layer : layers_) {
    blocks_.push_back([layer](const torch::Tensor& x, const torch::Tensor&) mutable {
      return torch::relu(layer->forward(x));
    });
  }
}

torch::Tensor MlpImpl::forward(torch::Tensor x) {
  x = x.flatten(1);
  for (const BlockFn& block : blocks_) {
    x = checkpointing_ && is_training() ? CheckpointBlock(block, x) : block(x, {});
  }
  return head_->forward(x);
}

CnnImpl::CnnImpl(const std::vector<int64_t>& input_shape,
                 const std::vector<int64_t>& channels,
                 const std::vector<int64_t>& hidden, int64_t out_features,
                 bool average_over_width)
    : average_over_width_(average_over_width) {
  const int64_t in_channels = input_shape.size() == 3 ? input_shape[0] : 1;
  const int64_t h = input_shape[input_shape.size() - 2];
  const int64_t w = input_shape[input_shape.size() - 1];
  conv1_ = register_module(
      "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels,
                                                          channels[0], 3)
                                     .padding(1)));
  conv2_ = register_module(
      "conv2", torch::nn::Conv2d(
                   torch::nn::Conv2dOptions(channels[0], channels[1], 3).padding(1)));
  int64_t width = channels[1] * (h / 4) * (average_over_width ? 1 : w / 4);
  for (size_t i = 0; i < hidden.size(); ++i) {
    dense_.push_back(register_module("fc" + std::to_string(i),
                                     torch::nn::Linear(width, hidden[i])));
    width = hidden[i];
  }
  head_ = register_module("head", torch::nn::Linear(width, out_features));
}

torch::Tensor CnnImpl::forward(torch::Tensor x) {
  if (x.dim() == 3) x = x.unsqueeze(1);  // [B, H, W] -> [B, 1, H, W]
  x = F::max_pool2d(torch::relu(conv1_->forward(x)), F::MaxPool2dFuncOptions(2));
  x = F::max_pool2d(torch::relu(conv2_->forward(x)), F::MaxPool2dFuncOptions(2));
  if (average_over_width_) x = x.mean(3);
  x = x.flatten(1);
  for (auto& layer : dense_) x = torch::relu(layer->forward(x));
  return head_->forward(x);
}

TransformerBlockImpl::TransformerBlockImpl(const TransformerSizes& s,
                                           bool causal)
    : heads_(s.n_heads), causal_(causal) {
  ln1_ = register_module("ln1", torch::nn::LayerNorm(
                                    torch::nn::LayerNormOptions({s.d_model})));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(
                                    torch::nn::LayerNormOptions({s.d_model})));
  qkv_ = register_module("qkv", torch::nn::Linear(s.d_model, 3 * s.d_model));
  proj_ = register_module("proj", torch::nn::Linear(s.d_model, s.d_model));
  fc1_ = register_module("fc1", torch::nn::Linear(s.d_model, s.d_ff));
  fc2_ = register_module("fc2", torch::nn::Linear(s.d_ff, s.d_model));
  dropout_ = register_module("dropout", torch::nn::Dropout(s.dropout));
  dropout_p_ = s.dropout;
}

torch::Tensor TransformerBlockImpl::forward(torch::Tensor x,
                                            const torch::Tensor& keep) {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  const int64_t hd = c / heads_;
  auto qkv = Dense(qkv_, ln1_->forward(x)).view({b, t, 3, heads_, hd});
  auto q = qkv.select(2, 0).transpose(1, 2);  // [B, H, T, hd]
  auto k = qkv.select(2, 1).transpose(1, 2);
  auto v = qkv.select(2, 2).transpose(1, 2);
  auto y = ScaledDotProductAttention(q, k, v, causal_, dropout_p_, is_training(), keep)
               .transpose(1, 2)
               .reshape({b, t, c});
  x = x + dropout_->forward(Dense(proj_, y));
  auto h = Dense(fc2_, F::gelu(Dense(fc1_, ln2_->forward(x))));
  return x + dropout_->forward(h);
}

TransformerImpl::TransformerImpl(const TransformerSizes& s,
                                 int64_t out_features, bool causal_lm,
                                 bool checkpointing)
    : max_seq_len_(s.max_seq_len),
      causal_lm_(causal_lm),
      checkpointing_(checkpointing) {
  token_ = register_module("token", torch::nn::Embedding(s.vocab_size, s.d_model));
  position_ =
      register_module("position", torch::nn::Embedding(s.max_seq_len, s.d_model));
  for (int64_t i = 0; i < s.n_layers; ++i) {
    layers_.push_back(register_module("block" + std::to_string(i),
                                      TransformerBlock(s, causal_lm)));
  }
  for (auto& layer : layers_) {
    blocks_.push_back([layer](const torch::Tensor& x, const torch::Tensor& keep) mutable {
      return layer->forward(x, keep);
    });
  }
  norm_ = register_module("norm", torch::nn::LayerNorm(
                                      torch::nn::LayerNormOptions({s.d_model})));
  head_ = register_module("head", torch::nn::Linear(s.d_model, out_features));
}

torch::Tensor TransformerImpl::forward(torch::Tensor tokens,
                                       const torch::Tensor& attention_mask) {
  const int64_t t = tokens.size(1);
  TORCH_CHECK(t <= max_seq_len_, "sequence of ", t,
              " tokens is longer than model.max_seq_len ", max_seq_len_);
  auto positions = torch::arange(t, torch::dtype(torch::kLong).device(tokens.device()));
  torch::Tensor x = token_->forward(tokens) + position_->forward(positions);
  // Which keys each query may attend to: [B, 1, 1, T], true for a token.
  const torch::Tensor keep = attention_mask.defined()
                                 ? attention_mask.ne(0).view({tokens.size(0), 1, 1, t})
                                 : torch::Tensor();
  for (const BlockFn& block : blocks_) {
    x = checkpointing_ && is_training() ? CheckpointBlock(block, x, keep)
                                        : block(x, keep);
  }
  x = norm_->forward(x);
  if (causal_lm_) return Dense(head_, x);
  if (!keep.defined()) return Dense(head_, x.mean(1));  // mean-pool over positions
  // Over the tokens only: padding neither pools nor is attended to.
  const torch::Tensor weights = attention_mask.to(x.scalar_type()).unsqueeze(-1);
  return Dense(head_, (x * weights).sum(1) / weights.sum(1));
}

}  // namespace trainctl::train
