// 8-bit Adam as Dettmers et al. publish it: the dynamic tree maps, the
// block-wise nearest rounding, the fused CPU step against the chunked one
// of other devices, old checkpoints, and the loss against AdamW's.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "worker/train/optim/blockwise_quant.h"
#include "worker/train/optim/optimizers.h"
#include "worker/train/torch_compat.h"

namespace trainctl::train {
namespace {

using Params = std::vector<torch::Tensor>;

torch::Tensor Loss(const torch::Tensor& w, const torch::Tensor& b,
                   const torch::Tensor& x, const torch::Tensor& y) {
  return (torch::matmul(x, w) + b - y).square().mean();
}

TEST(DynamicMapTest, HasThePublishedLayout) {
  for (bool is_signed : {true, false}) {
    const std::array<float, 256>& map = DynamicMap(is_signed);
    EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
    EXPECT_EQ(std::adjacent_find(map.begin(), map.end()), map.end()) << "a value twice";
    EXPECT_EQ(map.back(), 1.0f);
    EXPECT_EQ(std::count(map.begin(), map.end(), 0.0f), 1);
    // Per decade 10^-e: 2^(6-e) magnitudes of each sign (signed), or
    // 2^(7-e) (unsigned: the sign bit is one more fraction bit).
    for (int e = 0; e < 7; ++e) {
      const float hi = std::pow(10.0f, -e), lo = hi / 10;
      const auto in_decade = std::count_if(map.begin(), map.end(), [&](float x) {
        return x >= lo && x < hi;
      });
      EXPECT_EQ(in_decade, (is_signed ? 64 : 128) >> e) << "decade " << e;
    }
    // The smallest magnitude: the first bin's midpoint of 10^-6.
    const float smallest = is_signed ? 1e-6f * (0.1f + 0.9f / 2) : 1e-6f * (0.1f + 0.9f / 4);
    EXPECT_FLOAT_EQ(*std::upper_bound(map.begin(), map.end(), 0.0f), smallest);
    if (is_signed) {
      EXPECT_FLOAT_EQ(map.front(), -(0.1f + 0.9f * 127 / 128));
    } else {
      EXPECT_EQ(map.front(), 0.0f);
    }
  }
}

TEST(DynamicMapTest, QuantizationPicksTheNearestValuePerBlock) {
  torch::manual_seed(3);
  // Two blocks of very different magnitude plus a partial block.
  torch::Tensor x = torch::cat({torch::randn({256}), torch::randn({256}) * 1e-4,
                                torch::randn({100})});
  for (bool is_signed : {true, false}) {
    torch::Tensor in = is_signed ? x : x.square();
    QuantizedState q = QuantizeBlockwise(in, 256, is_signed);
    EXPECT_EQ(q.codes.scalar_type(), torch::kUInt8);
    EXPECT_EQ(q.codes.numel(), in.numel());
    EXPECT_EQ(q.absmax.numel(), 3);
    const std::array<float, 256>& map = DynamicMap(is_signed);
    auto codes = q.codes.accessor<uint8_t, 1>();
    auto absmax = q.absmax.accessor<float, 1>();
    auto values = in.accessor<float, 1>();
    for (int64_t i = 0; i < in.numel(); ++i) {
      const float y = values[i] / absmax[i / 256];
      const float chosen = std::abs(y - map[codes[i]]);
      for (float other : map) ASSERT_LE(chosen, std::abs(y - other) + 1e-7f) << i;
    }
    // Dequantized: the block maximum is exact; within the top decade the
    // error is at most half a bin (0.9 / 64 / 2 of the absmax, signed).
    torch::Tensor back = DequantizeBlockwise(q, 256, is_signed);
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t len = b < 2 ? 256 : 100;
      torch::Tensor orig = in.narrow(0, b * 256, len);
      torch::Tensor err = (back.narrow(0, b * 256, len) - orig).abs().max();
      EXPECT_LE(err.item<double>(), 1.001 * (0.9 / 128 / (is_signed ? 1 : 2)) * absmax[b]) << b;
    }
  }
}

// The fused CPU kernel and the chunked tensor path (other devices) are one
// algorithm: the same parameters and codes after several steps.
TEST(Adam8bitTest, TheFusedAndChunkedStepsAgree) {
  torch::manual_seed(5);
  const int64_t n = 256 * 2048 + 999;  // more than one chunk, a partial block
  torch::Tensor fused_p = torch::randn({n});
  torch::Tensor chunked_p = fused_p.clone();
  Adam8bitParamState fused_s, chunked_s;
  Adam8bitStepArgs args{1e-3, 0.9, 0.999, 1e-8, 0.01, 2048};
  for (int step = 1; step <= 4; ++step) {
    torch::Tensor g = torch::randn({n}) * (step == 2 ? 1e-3 : 1.0);
    fused_s.step(step);
    chunked_s.step(step);
    Adam8bitBlockwiseStep(fused_p, g, fused_s, args);
    args.chunked = true;
    Adam8bitBlockwiseStep(chunked_p, g, chunked_s, args);
    args.chunked = false;
  }
  EXPECT_LE((fused_p - chunked_p).abs().max().item<double>(), 1e-5);
  // Floating-point order may move a value across a midpoint now and then.
  const double differ =
      (fused_s.exp_avg_code() != chunked_s.exp_avg_code()).sum().item<double>() / n;
  EXPECT_LE(differ, 1e-3);
  EXPECT_TRUE(torch::allclose(fused_s.exp_avg_sq_absmax(), chunked_s.exp_avg_sq_absmax(),
                              1e-5, 0));
}

// A checkpoint from before the published maps resumes: its moments are
// decoded with the old maps and requantized with the new ones.
TEST(Adam8bitTest, ACheckpointOfTheOldMapsResumes) {
  const int64_t n = 8192;
  torch::Tensor p = torch::zeros({n}).requires_grad_();
  Adam8bit opt({p}, Adam8bitOptions(1e-3).block_size(4096));
  auto state = std::make_unique<Adam8bitParamState>();
  state->step(10);
  // Old signed codes: c stands for sign(c) (c / 127)^2 x scale; old unsigned
  // code 255 is the scale itself.
  torch::Tensor codes = torch::full({n}, 127, torch::kInt8);
  codes.narrow(0, 0, 4096).fill_(-127);
  state->exp_avg_codes(codes);
  state->exp_avg_scales(torch::tensor({0.5f, 0.25f}));
  state->exp_avg_sq_codes(torch::full({n}, 255, torch::kUInt8));
  state->exp_avg_sq_scales(torch::tensor({4.0f, 4.0f}));
  opt.state()[StateKeyOf(p)] = std::move(state);
  p.mutable_grad() = torch::zeros({n});
  opt.step();
  auto& s = static_cast<Adam8bitParamState&>(*opt.state().at(StateKeyOf(p)));
  EXPECT_EQ(s.step(), 11);
  EXPECT_FALSE(s.exp_avg_codes().defined());
  torch::Tensor m = DequantizeBlockwise({s.exp_avg_code(), s.exp_avg_absmax()}, 4096, true);
  torch::Tensor v = DequantizeBlockwise({s.exp_avg_sq_code(), s.exp_avg_sq_absmax()}, 4096, false);
  // A zero gradient: m decays by beta1, v by beta2. The signed map holds
  // 1 but not -1 (its lowest value is -0.99297), so a block of -absmax
  // loses 0.7% at each requantization.
  EXPECT_NEAR(m[0].item<float>(), -0.5 * 0.9, 0.5 * 0.9 * 0.015);
  EXPECT_FLOAT_EQ(m[n - 1].item<float>(), 0.25f * 0.9f);
  EXPECT_FLOAT_EQ(v[0].item<float>(), 4.0f * 0.999f);
}

// 64 x 128 weights: over 8-bit Adam's min_8bit_size, so they get 8-bit
// moments; the 128 biases keep fp32 ones.
constexpr int64_t kOutputs = 128;

struct RegressionRun {
  double final_loss = 0;
  int64_t state_bytes = 0;
};

RegressionRun RunRegression(const v1::OptimizerSpec& spec) {
  torch::manual_seed(7);
  const torch::Tensor x = torch::randn({4096, 64});
  const torch::Tensor w_true = torch::randn({64, kOutputs}) / 8.0;
  const torch::Tensor y = torch::matmul(x, w_true) + 0.1 * torch::randn({4096, kOutputs});
  Params params = {torch::zeros({64, kOutputs}).requires_grad_(),
                   torch::zeros({kOutputs}).requires_grad_()};
  auto opt = BuildOptimizer(spec, params);
  for (int step = 0; step < 300; ++step) {
    opt->zero_grad();
    Loss(params[0], params[1], x, y).backward();
    opt->step();
  }
  torch::NoGradGuard no_grad;
  return {Loss(params[0], params[1], x, y).item<double>(),
          OptimizerStateBytes(*opt)};
}

TEST(Adam8bitTest, TracksAdamWLossWithUnderAThirdOfTheState) {
  v1::OptimizerSpec spec;
  // At lr 1e-3 the run ends well above the noise floor (~0.0098), so the
  // final loss still reflects the optimizer rather than the data.
  spec.set_lr(1e-3);
  spec.add_betas(0.9);
  spec.add_betas(0.999);
  spec.set_eps(1e-8);
  spec.set_weight_decay(0.01);
  spec.set_block_size(256);  // several blocks, and a partial one for the bias
  spec.set_type("adamw");
  const RegressionRun fp32 = RunRegression(spec);
  spec.set_type("adam8bit");
  const RegressionRun q8 = RunRegression(spec);

  const double loss_ratio = q8.final_loss / fp32.final_loss;
  const double bytes_ratio =
      static_cast<double>(q8.state_bytes) / static_cast<double>(fp32.state_bytes);
  std::printf("adam8bit final loss %.6g, adamw %.6g, ratio %.4f\n", q8.final_loss,
              fp32.final_loss, loss_ratio);
  std::printf("state bytes adam8bit %lld, adamw %lld, ratio %.4f\n",
              static_cast<long long>(q8.state_bytes),
              static_cast<long long>(fp32.state_bytes), bytes_ratio);
  EXPECT_NEAR(loss_ratio, 1.0, 0.05);
  EXPECT_EQ(fp32.state_bytes, (64 * kOutputs + kOutputs) * 2 * 4);
  // Codes, one absmax per block of 256, and fp32 moments for the biases.
  EXPECT_EQ(q8.state_bytes, 64 * kOutputs * 2 + (64 * kOutputs / 256) * 2 * 4 + kOutputs * 2 * 4);
  EXPECT_LE(bytes_ratio, 0.30);
}

}  // namespace
}  // namespace trainctl::train
