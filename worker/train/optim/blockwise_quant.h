#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace trainctl::train {

// Block-wise 8-bit quantization of optimizer state (Dettmers et al. 2021,
// "8-bit Optimizers via Block-wise Quantization"): a flat tensor is cut into
// blocks of `block_size` elements, each stored as 8-bit codes plus one fp32
// scale (the block's absmax), so one outlier only costs precision inside its
// own block.
//
// Two maps, chosen so that small entries keep their meaning:
//   * Signed (first moment m): code c in [-127, 127] stands for
//       sign(c) * (c / 127)^2 * scale.
//     Quadratic spacing resolves values down to scale / 16129 while keeping
//     ~1.6% steps near the block maximum.
//   * Unsigned (second moment v >= 0): code 0 is exactly 0; code k in [1, 255]
//     stands for scale * 2^(-(255 - k) * kLogRange / 254), a log map with a
//     constant ~9% ratio between levels over 2^-32 of dynamic range. A nonzero
//     v never maps to 0 (it is clamped up to the smallest level): a v that
//     collapsed to 0 would turn the Adam denominator into eps and blow up the
//     update, whereas a slightly too large v only shrinks the step.
//
// Rounding is stochastic between the two neighbouring levels, with the
// probability chosen so the dequantized value is unbiased. Adam changes v by
// about (1 - beta2) = 0.1% per step, far below one level, so round-to-nearest
// would freeze the state; unbiased rounding lets it drift as it should. The
// random numbers come from a counter-based hash of (seed, element index), so
// steps are reproducible, need no generator state, and do not disturb the
// global torch RNG that models and data loaders use.
struct QuantizedState {
  torch::Tensor codes;   // int8 (signed map) or uint8 (unsigned map), numel
  torch::Tensor scales;  // fp32, one per block
};

inline constexpr double kLogRange = 32.0;

// Quantizes `x` (any shape; read as flat) with the signed or unsigned map.
// `seed` selects the rounding noise; use a different one per call.
QuantizedState QuantizeBlockwise(const torch::Tensor& x, int64_t block_size,
                                 bool is_signed, uint64_t seed);

// The fp32 tensor of `numel` elements that `q` encodes (flat).
torch::Tensor DequantizeBlockwise(const QuantizedState& q, int64_t block_size,
                                  bool is_signed);

// Uniform [0, 1) floats, one per element index in [0, n), from a hash of
// (seed, index); same values on every device.
torch::Tensor HashUniform(int64_t n, uint64_t seed, const torch::Device& device);

}  // namespace trainctl::train
