#pragma once

#include <torch/torch.h>

#include <vector>

#include "worker/train/models/activation_checkpoint.h"

namespace trainctl::train {

// The built-in networks. Each keeps its blocks as std::function members so
// gradient checkpointing can recompute them (see checkpoint.h).

// Linear+ReLU blocks, then a linear head. Inputs of any shape are flattened.
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t in_features, const std::vector<int64_t>& hidden,
          int64_t out_features, bool checkpointing);
  torch::Tensor forward(torch::Tensor x);

 private:
  std::vector<torch::nn::Linear> layers_;
  std::vector<BlockFn> blocks_;
  torch::nn::Linear head_{nullptr};
  bool checkpointing_;
};
TORCH_MODULE(Mlp);

// Two conv(3x3, same)+ReLU+maxpool(2) blocks, dense ReLU layers, a linear
// head. Inputs [B, C, H, W]. With average_over_width (model audio_cnn, over
// spectrograms [B, C, F, T]), the blocks' output is averaged over its width,
// time, before the dense layers: a clip's class does not depend on when in
// the clip a word is said, and the head's size not on the clip's length.
class CnnImpl : public torch::nn::Module {
 public:
  CnnImpl(const std::vector<int64_t>& input_shape,
          const std::vector<int64_t>& channels,
          const std::vector<int64_t>& hidden, int64_t out_features,
          bool average_over_width = false);
  torch::Tensor forward(torch::Tensor x);

 private:
  bool average_over_width_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  std::vector<torch::nn::Linear> dense_;
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(Cnn);

struct TransformerSizes {
  int64_t vocab_size = 0;
  int64_t d_model = 64;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t d_ff = 256;
  int64_t max_seq_len = 512;
  double dropout = 0;
};

// Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x)).
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(const TransformerSizes& sizes, bool causal);
  // x [B, T, d_model]; keep: bool [B, 1, 1, T], true for the keys that
  // may be attended to (undefined: all).
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& keep = {});

 private:
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  double dropout_p_ = 0;  // also on the attention weights
  int64_t heads_;
  bool causal_;
};
TORCH_MODULE(TransformerBlock);

// Token + learned positional embedding, blocks, final norm. The classifier
// mean-pools over positions (its tokens', given a padding mask) into a
// linear head; the GPT is causal and maps
// every position to next-token logits.
class TransformerImpl : public torch::nn::Module {
 public:
  TransformerImpl(const TransformerSizes& sizes, int64_t out_features,
                  bool causal_lm, bool checkpointing);
  // tokens int64 [B, T]; attention_mask [B, T]: 1 for a token, 0 for
  // padding (classifier only; undefined: all tokens).
  torch::Tensor forward(torch::Tensor tokens,
                        const torch::Tensor& attention_mask = {});

 private:
  torch::nn::Embedding token_{nullptr}, position_{nullptr};
  std::vector<TransformerBlock> layers_;
  std::vector<BlockFn> blocks_;
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear head_{nullptr};
  int64_t max_seq_len_;
  bool causal_lm_;
  bool checkpointing_;
};
TORCH_MODULE(Transformer);

}  // namespace trainctl::train
