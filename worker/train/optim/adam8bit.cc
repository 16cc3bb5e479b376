#include "worker/train/optim/adam8bit.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "worker/train/optim/blockwise_quant.h"
#include "worker/train/torch_compat.h"

namespace trainctl::train {
namespace {

// Blocks per chunk on the tensor-operation path: its temporaries are at
// most this many blocks, whatever the parameter's size.
constexpr int64_t kChunkBlocks = 256;

int64_t TensorBytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

struct Coefficients {
  float beta1, beta2, eps, decay, step_size, inv_sqrt_bias2;
};

Coefficients CoefficientsOf(const Adam8bitStepArgs& a, int64_t step) {
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(a.beta1, t);
  const double bias2 = 1.0 - std::pow(a.beta2, t);
  return {static_cast<float>(a.beta1), static_cast<float>(a.beta2),
          static_cast<float>(a.eps), static_cast<float>(1.0 - a.lr * a.weight_decay),
          static_cast<float>(a.lr / bias1), static_cast<float>(1.0 / std::sqrt(bias2))};
}

// The paper's kernel on CPU: per block, dequantize, update the moments and
// the parameter, take the new absmax, requantize. Two block-sized buffers
// per thread are the only fp32 copies.
template <typename T>
void FusedStep(T* p, const T* g, uint8_t* m_code, float* m_absmax, uint8_t* v_code,
               float* v_absmax, int64_t n, int64_t block, const Coefficients& c) {
  const std::array<float, 256>& smap = DynamicMap(true);
  const std::array<float, 256>& umap = DynamicMap(false);
  const int64_t blocks = (n + block - 1) / block;
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    std::vector<float> m(static_cast<size_t>(block)), v(static_cast<size_t>(block));
    for (int64_t b = first; b < last; ++b) {
      const int64_t lo = b * block;
      const int64_t len = std::min(block, n - lo);
      const float m_scale = m_absmax[b], v_scale = v_absmax[b];
      float m_max = 0, v_max = 0;
      for (int64_t i = 0; i < len; ++i) {
        const float gi = static_cast<float>(g[lo + i]);
        const float mi = c.beta1 * smap[m_code[lo + i]] * m_scale + (1 - c.beta1) * gi;
        const float vi = c.beta2 * umap[v_code[lo + i]] * v_scale + (1 - c.beta2) * gi * gi;
        const float denom = std::sqrt(vi) * c.inv_sqrt_bias2 + c.eps;
        p[lo + i] = static_cast<T>(static_cast<float>(p[lo + i]) * c.decay -
                                   c.step_size * mi / denom);
        m[static_cast<size_t>(i)] = mi;
        v[static_cast<size_t>(i)] = vi;
        m_max = std::max(m_max, std::abs(mi));
        v_max = std::max(v_max, vi);
      }
      m_absmax[b] = m_max;
      v_absmax[b] = v_max;
      const float m_inv = m_max > 0 ? 1 / m_max : 0;
      const float v_inv = v_max > 0 ? 1 / v_max : 0;
      for (int64_t i = 0; i < len; ++i) {
        m_code[lo + i] = NearestCode(m[static_cast<size_t>(i)] * m_inv, true);
        v_code[lo + i] = NearestCode(v[static_cast<size_t>(i)] * v_inv, false);
      }
    }
  });
}

// The same as tensor operations on chunks of blocks (any device).
void ChunkedStep(torch::Tensor& flat_param, const torch::Tensor& flat_grad,
                 Adam8bitParamState& s, int64_t block, const Coefficients& c) {
  const int64_t n = flat_param.numel();
  const int64_t blocks = (n + block - 1) / block;
  for (int64_t b0 = 0; b0 < blocks; b0 += kChunkBlocks) {
    const int64_t nb = std::min(kChunkBlocks, blocks - b0);
    const int64_t lo = b0 * block;
    const int64_t len = std::min(nb * block, n - lo);
    torch::Tensor m_code = s.exp_avg_code().narrow(0, lo, len);
    torch::Tensor v_code = s.exp_avg_sq_code().narrow(0, lo, len);
    torch::Tensor m_absmax = s.exp_avg_absmax().narrow(0, b0, nb);
    torch::Tensor v_absmax = s.exp_avg_sq_absmax().narrow(0, b0, nb);
    torch::Tensor g = flat_grad.narrow(0, lo, len).to(torch::kFloat32);
    torch::Tensor m = DequantizeBlockwise({m_code, m_absmax}, block, true);
    torch::Tensor v = DequantizeBlockwise({v_code, v_absmax}, block, false);
    m.mul_(c.beta1).add_(g, 1 - c.beta1);
    v.mul_(c.beta2).addcmul_(g, g, 1 - c.beta2);
    torch::Tensor p = flat_param.narrow(0, lo, len);
    torch::Tensor update = m / (v.sqrt().mul_(c.inv_sqrt_bias2).add_(c.eps));
    p.copy_(p.to(torch::kFloat32).mul_(c.decay).sub_(update.mul_(c.step_size)));
    QuantizedState qm = QuantizeBlockwise(m, block, true);
    QuantizedState qv = QuantizeBlockwise(v, block, false);
    m_code.copy_(qm.codes);
    m_absmax.copy_(qm.absmax);
    v_code.copy_(qv.codes);
    v_absmax.copy_(qv.absmax);
  }
}

// Moments of a checkpoint from before the published maps, or none.
bool HasLegacyState(const Adam8bitParamState& s) {
  return s.exp_avg_codes().defined() && s.exp_avg_sq_codes().defined();
}

}  // namespace

void Adam8bitBlockwiseStep(torch::Tensor& param, const torch::Tensor& grad,
                           Adam8bitParamState& s, const Adam8bitStepArgs& a) {
  const int64_t n = param.numel();
  const int64_t block = a.block_size;
  const int64_t blocks = (n + block - 1) / block;
  if (!s.exp_avg_code().defined()) {
    auto bytes = torch::TensorOptions().dtype(torch::kUInt8).device(param.device());
    auto floats = torch::TensorOptions().dtype(torch::kFloat32).device(param.device());
    // Zero moments: the code of 0 in each map, absmax 0.
    s.exp_avg_code(torch::full({n}, NearestCode(0.0f, true), bytes));
    s.exp_avg_sq_code(torch::full({n}, NearestCode(0.0f, false), bytes));
    s.exp_avg_absmax(torch::zeros({blocks}, floats));
    s.exp_avg_sq_absmax(torch::zeros({blocks}, floats));
  }
  const Coefficients c = CoefficientsOf(a, s.step());
  torch::Tensor p = param.is_contiguous() ? param : param.contiguous();
  torch::Tensor g = grad.reshape(-1).contiguous();
  if (param.device().is_cpu() && !a.chunked) {
    TORCH_CHECK(g.scalar_type() == p.scalar_type(), "Adam8bit: gradient dtype ",
                g.scalar_type(), " is not the parameter's ", p.scalar_type());
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.scalar_type(), "adam8bit", [&] {
      FusedStep<scalar_t>(p.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                          s.exp_avg_code().data_ptr<uint8_t>(),
                          s.exp_avg_absmax().data_ptr<float>(),
                          s.exp_avg_sq_code().data_ptr<uint8_t>(),
                          s.exp_avg_sq_absmax().data_ptr<float>(), n, block, c);
    });
  } else {
    torch::Tensor flat = p.view(-1);
    ChunkedStep(flat, g, s, block, c);
  }
  if (!p.is_same(param)) param.copy_(p);
}

Adam8bit::Adam8bit(std::vector<torch::optim::OptimizerParamGroup> groups,
                   Adam8bitOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<Adam8bitOptions>(defaults)) {
  const auto [beta1, beta2] = defaults.betas();
  TORCH_CHECK(defaults.lr() >= 0, "Adam8bit: invalid lr ", defaults.lr());
  TORCH_CHECK(defaults.eps() >= 0, "Adam8bit: invalid eps ", defaults.eps());
  TORCH_CHECK(beta1 >= 0 && beta1 < 1, "Adam8bit: beta1 must be in [0, 1)");
  TORCH_CHECK(beta2 >= 0 && beta2 < 1, "Adam8bit: beta2 must be in [0, 1)");
  TORCH_CHECK(defaults.weight_decay() >= 0, "Adam8bit: invalid weight_decay");
  TORCH_CHECK(defaults.block_size() > 0, "Adam8bit: block_size must be > 0");
}

torch::Tensor Adam8bit::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const Adam8bitOptions&>(group.options());
    const auto [beta1, beta2] = o.betas();
    const Adam8bitStepArgs args{o.lr(), beta1, beta2, o.eps(), o.weight_decay(),
                                o.block_size()};
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "Adam8bit does not support sparse gradients");
      const OptimizerStateKey key = StateKeyOf(p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        it = state_.emplace(key, std::make_unique<Adam8bitParamState>()).first;
      }
      auto& s = static_cast<Adam8bitParamState&>(*it->second);
      const bool small = p.numel() < o.min_8bit_size();
      if (HasLegacyState(s)) {
        torch::Tensor m = DequantizeLegacyBlockwise(s.exp_avg_codes(), s.exp_avg_scales(),
                                                    o.block_size(), true);
        torch::Tensor v = DequantizeLegacyBlockwise(
            s.exp_avg_sq_codes(), s.exp_avg_sq_scales(), o.block_size(), false);
        if (small) {
          s.exp_avg(m);
          s.exp_avg_sq(v);
        } else {
          QuantizedState qm = QuantizeBlockwise(m, o.block_size(), true);
          QuantizedState qv = QuantizeBlockwise(v, o.block_size(), false);
          s.exp_avg_code(qm.codes);
          s.exp_avg_absmax(qm.absmax);
          s.exp_avg_sq_code(qv.codes);
          s.exp_avg_sq_absmax(qv.absmax);
        }
        s.exp_avg_codes(torch::Tensor());
        s.exp_avg_scales(torch::Tensor());
        s.exp_avg_sq_codes(torch::Tensor());
        s.exp_avg_sq_scales(torch::Tensor());
      }
      s.step(s.step() + 1);
      if (!small) {
        Adam8bitBlockwiseStep(p, p.grad(), s, args);
        continue;
      }
      // fp32 moments, AdamW's formulas.
      torch::Tensor g = p.grad().to(torch::kFloat32);
      if (!s.exp_avg().defined()) {
        s.exp_avg(torch::zeros_like(g));
        s.exp_avg_sq(torch::zeros_like(g));
      }
      const Coefficients c = CoefficientsOf(args, s.step());
      s.exp_avg().mul_(beta1).add_(g, 1 - beta1);
      s.exp_avg_sq().mul_(beta2).addcmul_(g, g, 1 - beta2);
      torch::Tensor update =
          s.exp_avg() / (s.exp_avg_sq().sqrt().mul_(c.inv_sqrt_bias2).add_(c.eps));
      p.mul_(c.decay).sub_(update.mul_(c.step_size).to(p.scalar_type()));
    }
  }
  return loss;
}

int64_t Adam8bit::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& [key, state] : state_) {
    const auto& s = static_cast<const Adam8bitParamState&>(*state);
    for (const torch::Tensor* t :
         {&s.exp_avg_code(), &s.exp_avg_absmax(), &s.exp_avg_sq_code(),
          &s.exp_avg_sq_absmax(), &s.exp_avg(), &s.exp_avg_sq()}) {
      bytes += TensorBytes(*t);
    }
  }
  return bytes;
}

}  // namespace trainctl::train
