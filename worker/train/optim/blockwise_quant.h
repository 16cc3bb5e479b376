#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>

namespace trainctl::train {

// Block-wise dynamic quantization of optimizer state, as published by
// Dettmers, Lewis, Shleifer and Zettlemoyer, "8-bit Optimizers via
// Block-wise Quantization" (ICLR 2022), and as bitsandbytes implements it.
//
// A flat tensor is cut into blocks of `block_size` elements. Each block
// keeps its absolute maximum (fp32) and one byte per element: the index of
// the nearest value of a 256-entry codebook to element / absmax.
//
// The codebook is *dynamic tree quantization*: reading a code's bits after
// the sign, a run of E zeros, then an indicator 1, then the remaining F bits
// as a linear fraction, stands for 10^-E times one of 2^F evenly spaced
// values in [0.1, 1] (the midpoints of 2^F bins). Small magnitudes get few
// fraction bits and large ones many, so the map covers seven decades with a
// relative error that stays bounded, unlike a linear map. Exponents run
// from 0 to -6; 0 and 1 are in the map exactly.
//   * Signed map (first moment m): a sign bit, then 7 bits as above:
//     2^0 + ... + 2^6 = 127 magnitudes of each sign, plus 0 and 1.
//   * Unsigned map (second moment v >= 0): no sign, so each decade gets one
//     more fraction bit: 2^1 + ... + 2^7 = 254 values, plus 0 and 1.
// Rounding is to the nearest codebook value, as in the paper.
struct QuantizedState {
  torch::Tensor codes;   // uint8 codebook indices, numel
  torch::Tensor absmax;  // fp32, one per block
};

// The 256 codebook values, ascending.
const std::array<float, 256>& DynamicMap(bool is_signed);

// The index of the codebook value nearest to `y` (|y| <= 1 expected).
uint8_t NearestCode(float y, bool is_signed);

// Quantizes `x` (any shape, read flat) block by block.
QuantizedState QuantizeBlockwise(const torch::Tensor& x, int64_t block_size,
                                 bool is_signed);

// The fp32 tensor of codes.numel() elements that `q` encodes (flat).
torch::Tensor DequantizeBlockwise(const QuantizedState& q, int64_t block_size,
                                  bool is_signed);

// The moments that trainctl before the published maps kept (a quadratic
// signed map in int8 codes and a log map in uint8, with "scales"), decoded
// so that a checkpoint written then resumes.
torch::Tensor DequantizeLegacyBlockwise(const torch::Tensor& codes,
                                        const torch::Tensor& scales,
                                        int64_t block_size, bool is_signed);

}  // namespace trainctl::train
