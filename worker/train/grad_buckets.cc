#include "worker/train/grad_buckets.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>

namespace trainctl::train {
namespace {

// As DDP: a small first bucket gets communication going early in backward.
constexpr int64_t kFirstBucketBytes = 1 << 20;

}  // namespace

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> params,
                                 c10::intrusive_ptr<c10d::ProcessGroup> group,
                                 int world_size, int64_t bucket_bytes)
    : params_(std::move(params)),
      group_(std::move(group)),
      world_size_(world_size),
      alive_(std::make_shared<bool>(true)) {
  // Assign parameters, last first, to buckets.
  std::vector<int> bucket_of(params_.size());
  std::vector<int64_t> sizes{0};  // elements per bucket
  for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
    const int64_t cap = sizes.size() == 1 ? kFirstBucketBytes : bucket_bytes;
    if (sizes.back() > 0 && (sizes.back() + params_[i].numel()) * 4 > cap) {
      sizes.push_back(0);
    }
    bucket_of[i] = static_cast<int>(sizes.size()) - 1;
    sizes.back() += params_[i].numel();
  }
  buckets_.resize(sizes.size());
  const auto options = params_.front().options().dtype(torch::kFloat32);
  for (size_t b = 0; b < sizes.size(); ++b) {
    const bool last = b + 1 == sizes.size();
    buckets_[b].buffer = torch::zeros({sizes[b] + (last ? 1 : 0)}, options);
  }
  std::vector<int64_t> offsets(sizes.size(), 0);
  for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
    Bucket& bucket = buckets_[bucket_of[i]];
    torch::Tensor& p = params_[i];
    p.mutable_grad() =
        bucket.buffer.narrow(0, offsets[bucket_of[i]], p.numel()).view_as(p);
    offsets[bucket_of[i]] += p.numel();
    ++bucket.params;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    const int b = bucket_of[i];
    std::weak_ptr<bool> alive = alive_;
    accumulator->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, b, alive](const torch::autograd::variable_list& outputs,
                             const torch::autograd::variable_list&) {
              if (auto a = alive.lock(); a && *a) OnGradientReady(b);
              return outputs;
            }));
    accumulators_.push_back(std::move(accumulator));
  }
  ZeroGrad();
}

GradientBuckets::~GradientBuckets() {
  *alive_ = false;
  for (auto& bucket : buckets_) {
    if (bucket.work) bucket.work->wait();
  }
}

void GradientBuckets::ZeroGrad() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& bucket : buckets_) {
    bucket.buffer.zero_();
    bucket.pending = bucket.params;
    bucket.work.reset();
  }
  next_launch_ = 0;
}

void GradientBuckets::SetSyncing(bool syncing) {
  std::lock_guard<std::mutex> lock(mu_);
  syncing_ = syncing && group_ && world_size_ > 1;
  for (auto& bucket : buckets_) bucket.pending = bucket.params;
  next_launch_ = 0;
}

void GradientBuckets::SetLoss(double local_loss) {
  Bucket& last = buckets_.back();
  last.buffer[last.buffer.numel() - 1] = local_loss;
}

void GradientBuckets::OnGradientReady(int bucket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!syncing_) return;
  if (--buckets_[bucket].pending == 0) LaunchReadyLocked();
}

void GradientBuckets::LaunchReadyLocked() {
  while (next_launch_ < num_buckets() && buckets_[next_launch_].pending <= 0) {
    Bucket& bucket = buckets_[next_launch_++];
    torch::NoGradGuard no_grad;
    bucket.buffer.div_(world_size_);
    std::vector<torch::Tensor> tensors{bucket.buffer};
    bucket.work = group_->allreduce(tensors);
  }
}

double GradientBuckets::Finish(double* exposed_seconds) {
  const auto start = std::chrono::steady_clock::now();
  Bucket& last = buckets_.back();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!syncing_) {
      if (exposed_seconds) *exposed_seconds = 0;
      return last.buffer[last.buffer.numel() - 1].item<double>();
    }
    // Parameters that got no gradient this step never fired their hook.
    for (auto& bucket : buckets_) bucket.pending = 0;
    LaunchReadyLocked();
  }
  for (auto& bucket : buckets_) {
    if (bucket.work) bucket.work->wait();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    syncing_ = false;
  }
  if (exposed_seconds) {
    *exposed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  return last.buffer[last.buffer.numel() - 1].item<double>();
}

}  // namespace trainctl::train
