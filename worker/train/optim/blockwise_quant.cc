#include "worker/train/optim/blockwise_quant.h"

#include <cmath>

namespace trainctl::train {
namespace {

constexpr int64_t kMask32 = 0xFFFFFFFF;
constexpr int64_t kGolden32 = 0x9E3779B1;  // 2^32 / phi, odd
constexpr int64_t kHashMul = 0x45D9F3B;

// Pads the flat tensor `x` with zeros to a multiple of `block_size` and views
// it as [blocks, block_size].
torch::Tensor AsBlocks(const torch::Tensor& flat, int64_t block_size) {
  const int64_t n = flat.numel();
  const int64_t blocks = (n + block_size - 1) / block_size;
  const int64_t pad = blocks * block_size - n;
  torch::Tensor padded = pad > 0 ? torch::constant_pad_nd(flat, {0, pad}) : flat;
  return padded.view({blocks, block_size});
}

// splitmix64 finalizer: spreads nearby seeds (step, index) over 32 bits.
int64_t MixSeed(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<int64_t>(z & 0xFFFFFFFFULL);
}

}  // namespace

torch::Tensor HashUniform(int64_t n, uint64_t seed, const torch::Device& device) {
  // 32-bit integer hash evaluated with int64 tensor ops; every product stays
  // below 2^63, so nothing overflows.
  torch::Tensor h =
      torch::arange(n, torch::TensorOptions().dtype(torch::kInt64).device(device));
  h = (h * kGolden32 + MixSeed(seed)).bitwise_and_(kMask32);
  for (int round = 0; round < 2; ++round) {
    h = h.bitwise_xor(h.bitwise_right_shift(16));
    h = (h * kHashMul).bitwise_and_(kMask32);
  }
  h = h.bitwise_xor(h.bitwise_right_shift(16));
  // The top 24 bits convert to float exactly.
  return h.bitwise_right_shift(8).to(torch::kFloat32).mul_(1.0 / 16777216.0);
}

QuantizedState QuantizeBlockwise(const torch::Tensor& x, int64_t block_size,
                                 bool is_signed, uint64_t seed) {
  TORCH_CHECK(block_size > 0, "block_size must be > 0");
  const int64_t n = x.numel();
  torch::Tensor blocks =
      AsBlocks(x.reshape(-1).to(torch::kFloat32), block_size);
  QuantizedState q;
  q.scales = blocks.abs().amax(1);
  torch::Tensor safe =
      torch::where(q.scales > 0, q.scales, torch::ones_like(q.scales));
  torch::Tensor y = blocks / safe.unsqueeze(1);
  torch::Tensor u =
      HashUniform(blocks.numel(), seed, x.device()).view(blocks.sizes());

  torch::Tensor codes;
  if (is_signed) {
    torch::Tensor a = y.abs().clamp_max_(1.0);
    torch::Tensor lo = (a.sqrt() * 127.0).floor_().clamp_(0, 126);
    torch::Tensor lv = (lo / 127.0).square();
    torch::Tensor hv = ((lo + 1.0) / 127.0).square();
    torch::Tensor up = u < (a - lv) / (hv - lv);
    codes = ((lo + up.to(torch::kFloat32)) * y.sign()).to(torch::kInt8);
  } else {
    y.clamp_(0.0, 1.0);
    const double step = kLogRange / 254.0;  // log2 ratio between levels
    // log2(0) = -inf clamps to level 1 here and becomes code 0 below.
    torch::Tensor lo = (y.log2() / step + 255.0).floor_().clamp_(1, 254);
    torch::Tensor lv = torch::exp2((lo - 255.0) * step);
    torch::Tensor hv = torch::exp2((lo - 254.0) * step);
    torch::Tensor up = u < (y - lv) / (hv - lv);
    torch::Tensor k = lo + up.to(torch::kFloat32);
    codes = torch::where(y > 0, k, torch::zeros_like(k)).to(torch::kUInt8);
  }
  // Drop the padding so a small tensor does not pay for a whole block.
  q.codes = codes.view(-1).narrow(0, 0, n).clone();
  return q;
}

torch::Tensor DequantizeBlockwise(const QuantizedState& q, int64_t block_size,
                                  bool is_signed) {
  const int64_t n = q.codes.numel();
  torch::Tensor c = q.codes.to(torch::kFloat32);
  torch::Tensor values;
  if (is_signed) {
    values = c * c.abs() * (1.0 / (127.0 * 127.0));
  } else {
    const double step = kLogRange / 254.0;
    values = torch::where(c > 0, torch::exp2((c - 255.0) * step),
                          torch::zeros_like(c));
  }
  torch::Tensor blocks = AsBlocks(values, block_size) * q.scales.unsqueeze(1);
  return blocks.view(-1).narrow(0, 0, n);
}

}  // namespace trainctl::train
