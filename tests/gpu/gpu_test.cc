// The CUDA path's pieces on a real GPU: NCCL, the gradient buckets'
// hooks through it, autocast, the fused loss scaler, the device's RNG.

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cmath>
#include <limits>

#include "tests/gpu/gpu_fixture.h"
#include "worker/train/autocast_scope.h"
#include "worker/train/collective_group.h"
#include "worker/train/grad_buckets.h"
#include "worker/train/grad_sync.h"
#include "worker/train/loss_scaler.h"
#include "worker/train/optim/fused_adamw.h"
#include "worker/train/optim/optimizers.h"
#include "worker/train/stream_timer.h"

namespace trainctl::train {
namespace {

// An NCCL group of one rank, shut down before it is destroyed, as the
// rank process does (2.x's NCCL backend expects it).
class NcclAtWorldSizeOne {
 public:
  NcclAtWorldSizeOne() {
    GroupOptions options;
    options.timeout = std::chrono::milliseconds(60'000);
    group_ = MakeNcclGroup(c10::make_intrusive<c10d::HashStore>(), 0, 1, options);
  }
  ~NcclAtWorldSizeOne() { ShutdownGroup(*group_); }
  const GroupPtr& operator*() const { return group_; }

 private:
  GroupPtr group_;
};

TEST_F(GpuTest, NcclGroupAtWorldSizeOneReducesBroadcastsAndGathers) {
  NcclAtWorldSizeOne nccl;
  const GroupPtr& group = *nccl;
  std::vector<torch::Tensor> t{torch::arange(4, torch::dtype(torch::kFloat32).device(device_))};
  group->allreduce(t)->wait();
  EXPECT_TRUE(torch::equal(t[0].cpu(), torch::arange(4, torch::kFloat32)));
  BroadcastFromRankZero(group, t);
  RankCollectives sync({t[0]}, group, 1);
  EXPECT_EQ(sync.GatherScalars({1.5, -2.0}),
            (std::vector<std::vector<double>>{{1.5, -2.0}}));
  // The checkpoint path: bytes through NCCL in device tensors.
  absl::StatusOr<std::string> bytes =
      BroadcastBytes(group, 0, device_, std::string("checkpoint bytes"));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "checkpoint bytes");
}

TEST_F(GpuTest, GradientBucketsSendThroughNcclFromTheAutogradHooks) {
  torch::manual_seed(3);
  // The first bucket closes at 1 MiB (as DDP's): the middle layer's
  // 256x1024 weights cross it, so the first layer goes in a second bucket.
  auto make_net = [] {
    return torch::nn::Sequential(torch::nn::Linear(64, 256), torch::nn::ReLU(),
                                 torch::nn::Linear(256, 1024), torch::nn::ReLU(),
                                 torch::nn::Linear(1024, 10));
  };
  torch::nn::Sequential net = make_net();
  net->to(device_);
  torch::nn::Sequential reference = make_net();
  reference->to(device_);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < net->parameters().size(); ++i) {
      reference->parameters()[i].copy_(net->parameters()[i]);
    }
  }
  NcclAtWorldSizeOne nccl;
  const GroupPtr& group = *nccl;
  // 4 KiB buckets after the first: two collectives launched from the hooks.
  GradientBuckets buckets(net->parameters(), group, 1, 4096);
  ASSERT_EQ(buckets.num_buckets(), 2);
  torch::Tensor x = torch::randn({32, 64}, device_);
  for (int step = 0; step < 2; ++step) {
    buckets.ZeroGrad();
    torch::Tensor loss = net->forward(x).pow(2).mean();
    buckets.SetSyncing(true);
    buckets.SetLoss(loss.detach().reshape({1}));
    loss.backward();
    torch::Tensor mean_loss = buckets.Finish();
    EXPECT_NEAR(mean_loss.item<double>(), loss.item<double>(), 1e-6);
  }
  reference->zero_grad();
  reference->forward(x).pow(2).mean().backward();
  for (size_t i = 0; i < net->parameters().size(); ++i) {
    EXPECT_TRUE(torch::allclose(net->parameters()[i].grad(),
                                reference->parameters()[i].grad(), 1e-5, 1e-6))
        << "parameter " << i;
  }
}

TEST_F(GpuTest, Bf16AutocastOnCudaAndBack) {
  torch::nn::Linear linear(16, 16);
  linear->to(device_);
  torch::Tensor x = torch::randn({4, 16}, device_);
  {
    AutocastScope autocast("bf16", device_);
    EXPECT_EQ(linear->forward(x).scalar_type(), torch::kBFloat16);
    {
      AutocastScope inner("bf16", device_);  // nests, as the recompute does
    }
    EXPECT_EQ(linear->forward(x).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(linear->forward(x).scalar_type(), torch::kFloat32);
}

TEST_F(GpuTest, LossScalerOnCudaSkipsAnInfAndHalvesTheScale) {
  DynamicLossScaler scaler(1024.0, 2, device_);
  EXPECT_TRUE(scaler.scale_tensor().is_cuda());
  torch::Tensor p = torch::zeros({3}, torch::dtype(torch::kFloat32).device(device_).requires_grad(true));
  p.mutable_grad() = torch::full({3}, 2048.0, torch::dtype(torch::kFloat32).device(device_));
  EXPECT_TRUE(scaler.Unscale({p}));
  EXPECT_TRUE(torch::equal(p.grad().cpu(), torch::full({3}, 2.0)));
  scaler.Update(true);
  p.grad()[1].fill_(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(scaler.Unscale({p}));
  scaler.Update(false);
  EXPECT_DOUBLE_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.Save().good_steps, 0);
}

TEST_F(GpuTest, GradientNormAndClippingStayOnTheDevice) {
  torch::Tensor a = torch::zeros({2}, torch::dtype(torch::kFloat32).device(device_).requires_grad(true));
  torch::Tensor b = torch::zeros({1}, torch::dtype(torch::kFloat32).device(device_).requires_grad(true));
  a.mutable_grad() = torch::tensor({3.0f, 0.0f}, torch::dtype(torch::kFloat32).device(device_));
  b.mutable_grad() = torch::tensor({4.0f}, torch::dtype(torch::kFloat32).device(device_));
  RankCollectives sync({a, b}, nullptr, 1);
  torch::Tensor norm = sync.GradientNorm();
  EXPECT_TRUE(norm.is_cuda());
  EXPECT_DOUBLE_EQ(norm.item<double>(), 5.0);
  sync.ClipGradients(norm, 1.0);
  EXPECT_NEAR(sync.GradientNorm().item<double>(), 1.0, 1e-6);
}

TEST_F(GpuTest, CommunicationTimeIsMeasuredOnTheStream) {
  StreamTimer timer(device_);
  torch::Tensor big = torch::randn({4096, 4096}, device_);
  timer.Start();
  for (int i = 0; i < 20; ++i) big = big.mm(big).div_(4096);  // queued, not run
  timer.Stop();
  // A host clock here would read the launches only; the events cover the
  // work the stream did between them.
  const double seconds = timer.TakeSeconds();
  EXPECT_GT(seconds, 0.0);
  EXPECT_EQ(timer.TakeSeconds(), 0.0);
}

TEST_F(GpuTest, AdamWOnCudaIsTheFusedKernelAndMatchesTheLoop) {
  v1::OptimizerSpec spec;
  spec.set_type("adamw");
  spec.set_lr(0.01);
  spec.set_weight_decay(0.1);
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({64, 32}, device_);
  const torch::Tensor w0 = torch::randn({32, 8}, device_);
  std::vector<torch::Tensor> fused_params{w0.clone().requires_grad_()};
  std::vector<torch::Tensor> loop_params{w0.clone().requires_grad_()};
  std::unique_ptr<torch::optim::Optimizer> fused = BuildOptimizer(spec, fused_params);
  ASSERT_NE(dynamic_cast<FusedAdamW*>(fused.get()), nullptr);
  torch::optim::AdamW loop(loop_params,
                           torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  for (int step = 0; step < 50; ++step) {
    for (auto& [optimizer, params] :
         {std::pair<torch::optim::Optimizer*, std::vector<torch::Tensor>*>{fused.get(), &fused_params},
          {&loop, &loop_params}}) {
      optimizer->zero_grad();
      x.matmul((*params)[0]).tanh().pow(2).mean().backward();
      optimizer->step();
    }
  }
  // The two evaluate the update in different orders; Adam divides by
  // sqrt(v), which magnifies rounding where gradients are small (5e-5 after
  // 50 steps on an H200). They must agree to 0.1% of the distance moved.
  const double moved = (loop_params[0] - w0).abs().max().item<double>();
  ASSERT_GT(moved, 0.1);
  EXPECT_LE((fused_params[0] - loop_params[0]).abs().max().item<double>(), 1e-3 * moved);
}

// 8-bit Adam on CUDA runs the chunked tensor path; on CPU the fused loop.
// The same state and parameters after several steps.
TEST_F(GpuTest, Adam8bitOnCudaMatchesTheCpuKernel) {
  torch::manual_seed(6);
  const int64_t n = 300 * 2048 + 77;  // over one chunk, a partial block
  const torch::Tensor p0 = torch::randn({n});
  torch::Tensor cpu_p = p0.clone();
  torch::Tensor cuda_p = p0.to(device_);
  Adam8bitParamState cpu_s, cuda_s;
  const Adam8bitStepArgs args{1e-3, 0.9, 0.999, 1e-8, 0.01, 2048};
  for (int step = 1; step <= 5; ++step) {
    const torch::Tensor g = torch::randn({n});
    cpu_s.step(step);
    cuda_s.step(step);
    Adam8bitBlockwiseStep(cpu_p, g, cpu_s, args);
    Adam8bitBlockwiseStep(cuda_p, g.to(device_), cuda_s, args);
  }
  // The GPU rounds differently (fused multiply-adds, its own sqrt), so now
  // and then a moment lands on the other side of a midpoint between two
  // codes. Such an element's update moves by a code's width, a few percent
  // of lr (2.1e-5 at lr 1e-3 on an H200); the rest agree to a few ulps.
  const torch::Tensor gap = (cuda_p.cpu() - cpu_p).abs();
  EXPECT_LE(gap.max().item<double>(), 0.1 * args.lr);
  const double apart = (gap > 1e-5).sum().item<double>() / n;
  EXPECT_LE(apart, 1e-3);
  const double differ =
      (cuda_s.exp_avg_code().cpu() != cpu_s.exp_avg_code()).sum().item<double>() / n;
  EXPECT_LE(differ, 1e-3);
}

TEST_F(GpuTest, DeviceGeneratorStateRoundTrips) {
  torch::Tensor state = GeneratorState(device_);
  torch::Tensor first = torch::rand({8}, device_);
  SetGeneratorState(device_, state);
  EXPECT_TRUE(torch::equal(first, torch::rand({8}, device_)));
}

}  // namespace
}  // namespace trainctl::train
