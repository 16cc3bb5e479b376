// GradientBuckets' layout: which parameters share a collective.

#include "worker/train/grad_buckets.h"

#include <gtest/gtest.h>

#include <vector>

namespace trainctl::train {
namespace {

std::vector<torch::Tensor> Params(const std::vector<int64_t>& sizes) {
  std::vector<torch::Tensor> params;
  for (int64_t n : sizes) params.push_back(torch::zeros({n}, torch::requires_grad()));
  return params;
}

constexpr int64_t kBucketBytes = 25 << 20;

TEST(GradBucketsTest, SmallMlpSyncsInOneCollective) {
  // The default mlp [512, 256] on 28x28 inputs, in module order.
  auto params = Params({784 * 512, 512, 512 * 256, 256, 256 * 10, 10});
  GradientBuckets buckets(params, {}, 1, kBucketBytes);
  ASSERT_EQ(buckets.num_buckets(), 1);
  EXPECT_EQ(buckets.bucket_elements(0), 784 * 512 + 512 + 512 * 256 + 256 +
                                            256 * 10 + 10 + 3);  // + loss, stop and regroup votes
}

TEST(GradBucketsTest, CnnSendsItsDenseLayersBeforeItsConvolutions) {
  // conv1, conv2, fc0, head: backward reaches the dense layers first.
  auto params = Params({32 * 9, 32, 64 * 32 * 9, 64, 3136 * 128, 128,
                        128 * 10, 10});
  GradientBuckets buckets(params, {}, 1, kBucketBytes);
  ASSERT_EQ(buckets.num_buckets(), 2);
  EXPECT_EQ(buckets.bucket_elements(0), 128 * 10 + 10 + 3136 * 128 + 128);
  EXPECT_EQ(buckets.bucket_elements(1), 64 * 32 * 9 + 64 + 32 * 9 + 32 + 3);
}

TEST(GradBucketsTest, LargeModelsFillBucketsUpToTheCap) {
  // 40 parameters of 2.5 MiB: a first bucket of one, then 10 per 25 MiB.
  auto params = Params(std::vector<int64_t>(40, 655360));
  GradientBuckets buckets(params, {}, 1, kBucketBytes);
  ASSERT_EQ(buckets.num_buckets(), 5);
  EXPECT_EQ(buckets.bucket_elements(0), 655360);
  for (int b = 1; b < 4; ++b) EXPECT_EQ(buckets.bucket_elements(b), 10 * 655360);
  EXPECT_EQ(buckets.bucket_elements(4), 9 * 655360 + 3);
}

TEST(GradBucketsTest, GradientsAreViewsIntoTheBuckets) {
  auto params = Params({3, 4});
  GradientBuckets buckets(params, {}, 1, kBucketBytes);
  (params[0].sum() * 2 + params[1].sum() * 3).backward();
  EXPECT_TRUE(torch::equal(params[0].grad(), torch::full({3}, 2.0)));
  EXPECT_TRUE(torch::equal(params[1].grad(), torch::full({4}, 3.0)));
  buckets.ZeroGrad();
  EXPECT_EQ(params[0].grad().abs().sum().item<float>(), 0);
  EXPECT_EQ(params[1].grad().abs().sum().item<float>(), 0);
}

}  // namespace
}  // namespace trainctl::train
