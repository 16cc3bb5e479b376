#include "worker/train/optim/blockwise_quant.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace trainctl::train {
namespace {

constexpr int kExponents = 7;  // decades 10^0 .. 10^-6

// The codebook from its bit layout: for each decade, the midpoints of the
// 2^fraction_bits bins of [0.1, 1], scaled by the decade.
std::array<float, 256> BuildMap(bool is_signed) {
  std::vector<double> values = {0.0, 1.0};
  for (int e = 0; e < kExponents; ++e) {
    // Leading zeros e, then the indicator bit: what is left is fraction.
    // Without a sign bit, a code has one more bit for the fraction.
    const int fraction_bits = (kExponents - 1 - e) + (is_signed ? 0 : 1);
    const int bins = 1 << fraction_bits;
    const double decade = std::pow(10.0, -e);
    for (int k = 0; k < bins; ++k) {
      const double lo = 0.1 + 0.9 * k / bins;
      const double hi = 0.1 + 0.9 * (k + 1) / bins;
      values.push_back(decade * (lo + hi) / 2);
      if (is_signed) values.push_back(-decade * (lo + hi) / 2);
    }
  }
  TORCH_CHECK(values.size() == 256, "dynamic map has ", values.size(), " values");
  std::sort(values.begin(), values.end());
  std::array<float, 256> map{};
  for (size_t i = 0; i < 256; ++i) map[i] = static_cast<float>(values[i]);
  return map;
}

// Halfway points between neighbouring codebook values: the nearest code of
// y is how many of them lie below it.
std::array<float, 255> Midpoints(const std::array<float, 256>& map) {
  std::array<float, 255> mid{};
  for (size_t i = 0; i < 255; ++i) mid[i] = (map[i] + map[i + 1]) / 2;
  return mid;
}

struct Codebook {
  std::array<float, 256> map;
  std::array<float, 255> mid;
};

const Codebook& Book(bool is_signed) {
  static const Codebook kSigned{BuildMap(true), Midpoints(BuildMap(true))};
  static const Codebook kUnsigned{BuildMap(false), Midpoints(BuildMap(false))};
  return is_signed ? kSigned : kUnsigned;
}

// The codebook (or its midpoints) as a tensor on `device`, made once per
// device: the chunked step asks four times a chunk, and a host-to-device
// copy each time would be most of its work on a GPU.
const torch::Tensor& TableOn(bool is_signed, bool midpoints, const torch::Device& device) {
  static std::mutex mu;
  // Never destroyed: device memory freed after CUDA shut down at exit fails.
  static auto* tables = new std::map<std::string, torch::Tensor>();  // GUARDED_BY(mu)
  const std::string key =
      absl::StrCat(device.str(), is_signed ? "/signed" : "/unsigned", midpoints ? "/mid" : "");
  std::lock_guard<std::mutex> lock(mu);
  auto it = tables->find(key);
  if (it == tables->end()) {
    const Codebook& book = Book(is_signed);
    torch::Tensor host =
        midpoints ? torch::from_blob(const_cast<float*>(book.mid.data()), {255}, torch::kFloat32)
                  : torch::from_blob(const_cast<float*>(book.map.data()), {256}, torch::kFloat32);
    it = tables->emplace(key, host.clone().to(device)).first;
  }
  return it->second;
}

torch::Tensor AsBlocks(const torch::Tensor& flat, int64_t block_size) {
  const int64_t n = flat.numel();
  const int64_t blocks = (n + block_size - 1) / block_size;
  const int64_t pad = blocks * block_size - n;
  torch::Tensor padded = pad > 0 ? torch::constant_pad_nd(flat, {0, pad}) : flat;
  return padded.view({blocks, block_size});
}

}  // namespace

const std::array<float, 256>& DynamicMap(bool is_signed) { return Book(is_signed).map; }

uint8_t NearestCode(float y, bool is_signed) {
  const std::array<float, 255>& mid = Book(is_signed).mid;
  return static_cast<uint8_t>(std::upper_bound(mid.begin(), mid.end(), y) - mid.begin());
}

QuantizedState QuantizeBlockwise(const torch::Tensor& x, int64_t block_size,
                                 bool is_signed) {
  TORCH_CHECK(block_size > 0, "block_size must be > 0");
  const int64_t n = x.numel();
  torch::Tensor blocks = AsBlocks(x.reshape(-1).to(torch::kFloat32), block_size);
  QuantizedState q;
  q.absmax = blocks.abs().amax(1);
  torch::Tensor safe = torch::where(q.absmax > 0, q.absmax, torch::ones_like(q.absmax));
  torch::Tensor y = (blocks / safe.unsqueeze(1)).view(-1).narrow(0, 0, n);
  const torch::Tensor& boundaries = TableOn(is_signed, /*midpoints=*/true, x.device());
  // right=true: a value on a midpoint goes up, as upper_bound does.
  q.codes = torch::bucketize(y, boundaries, /*out_int32=*/true, /*right=*/true)
                .to(torch::kUInt8);
  return q;
}

torch::Tensor DequantizeBlockwise(const QuantizedState& q, int64_t block_size,
                                  bool is_signed) {
  const int64_t n = q.codes.numel();
  const torch::Tensor& table = TableOn(is_signed, /*midpoints=*/false, q.codes.device());
  torch::Tensor values = table.index_select(0, q.codes.reshape(-1).to(torch::kInt32));
  torch::Tensor blocks = AsBlocks(values, block_size) * q.absmax.unsqueeze(1);
  return blocks.view(-1).narrow(0, 0, n);
}

torch::Tensor DequantizeLegacyBlockwise(const torch::Tensor& codes,
                                        const torch::Tensor& scales,
                                        int64_t block_size, bool is_signed) {
  const int64_t n = codes.numel();
  torch::Tensor c = codes.reshape(-1).to(torch::kFloat32);
  torch::Tensor values;
  if (is_signed) {
    values = c * c.abs() * (1.0 / (127.0 * 127.0));
  } else {
    const double step = 32.0 / 254.0;
    values = torch::where(c > 0, torch::exp2((c - 255.0) * step), torch::zeros_like(c));
  }
  torch::Tensor blocks = AsBlocks(values, block_size) * scales.to(torch::kFloat32).unsqueeze(1);
  return blocks.view(-1).narrow(0, 0, n);
}

}  // namespace trainctl::train
