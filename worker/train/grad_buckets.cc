#include "worker/train/grad_buckets.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>

#include "worker/train/collective_wait.h"

namespace trainctl::train {
namespace {

// As DDP: a small first bucket gets communication going early in backward.
constexpr int64_t kFirstBucketBytes = 1 << 20;

}  // namespace

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> params,
                                 GroupPtr group,
                                 int world_size, int64_t bucket_bytes)
    : params_(std::move(params)),
      group_(std::move(group)),
      world_size_(world_size),
      alive_(std::make_shared<bool>(true)),
      bucket_of_(params_.size()),
      ready_(params_.size(), 0) {
  // Assign parameters, last first, to buckets. As DDP does, a bucket closes
  // once it holds its cap or more, with the parameter that crossed it: a
  // small model then syncs in one collective (each costs a latency that
  // matters more than overlap on a busy CPU: an MLP at 2 ranks on 2 cores
  // ran 35% faster than with its small layers sent apart), and a CNN
  // sends its dense layers while its convolutions' backward goes on.
  std::vector<int64_t> sizes{0};  // elements per bucket
  for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
    bucket_of_[i] = static_cast<int>(sizes.size()) - 1;
    sizes.back() += params_[i].numel();
    const int64_t cap = sizes.size() == 1 ? kFirstBucketBytes : bucket_bytes;
    if (sizes.back() * 4 >= cap && i > 0) sizes.push_back(0);
  }
  buckets_.resize(sizes.size());
  const auto options = params_.front().options().dtype(torch::kFloat32);
  for (size_t b = 0; b < sizes.size(); ++b) {
    const bool last = b + 1 == sizes.size();
    buckets_[b].buffer =
        torch::zeros({sizes[b] + (last ? kExtraSlots : 0)}, options);
  }
  for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
    Bucket& bucket = buckets_[bucket_of_[i]];
    torch::Tensor& p = params_[i];
    const int64_t offset = bucket.ends.empty() ? 0 : bucket.ends.back();
    p.mutable_grad() = bucket.buffer.narrow(0, offset, p.numel()).view_as(p);
    bucket.params.push_back(i);
    bucket.ends.push_back(offset + p.numel());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    std::weak_ptr<bool> alive = alive_;
    const int index = static_cast<int>(i);
    accumulator->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, index, alive](const torch::autograd::variable_list& outputs,
                                 const torch::autograd::variable_list&) {
              if (auto a = alive.lock(); a && *a) OnGradientReady(index);
              return outputs;
            }));
    accumulators_.push_back(std::move(accumulator));
  }
  ZeroGrad();
}

GradientBuckets::~GradientBuckets() {
  *alive_ = false;
  // After a failed collective (an in-place recovery lets go of the group)
  // the rest fail too; what they throw ends nothing here. In an abandoned
  // group they may never end: not waited for (each work holds its tensors).
  for (auto& bucket : buckets_) {
    for (auto& work : bucket.works) {
      try {
        WaitForCollective(*work);
      } catch (const std::exception&) {
      }
    }
  }
}

void GradientBuckets::ZeroGrad() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& bucket : buckets_) bucket.buffer.zero_();
}

void GradientBuckets::SetSyncing(bool syncing) {
  std::lock_guard<std::mutex> lock(mu_);
  // With a group even at world size 1 (the GPU tests run NCCL so).
  syncing_ = syncing && group_;
  std::fill(ready_.begin(), ready_.end(), 0);
  for (auto& bucket : buckets_) {
    bucket.ready_prefix = 0;
    bucket.launched = 0;
    bucket.works.clear();
  }
  next_launch_ = 0;
}

torch::Tensor GradientBuckets::ExtraSlot(int slot) {
  torch::Tensor& buffer = buckets_.back().buffer;
  return buffer.narrow(0, buffer.numel() - kExtraSlots + slot, 1);
}

void GradientBuckets::SetLoss(const torch::Tensor& local_loss) {
  torch::NoGradGuard no_grad;
  ExtraSlot(kLossSlot).copy_(local_loss.reshape({1}));
}

void GradientBuckets::SetStopVote(bool stop) {
  torch::NoGradGuard no_grad;
  ExtraSlot(kStopSlot).fill_(stop ? 1.0 : 0.0);
}

bool GradientBuckets::StopVoted() {
  return ExtraSlot(kStopSlot).item<float>() > 0;
}

void GradientBuckets::SetRegroupVote(bool regroup) {
  torch::NoGradGuard no_grad;
  ExtraSlot(kRegroupSlot).fill_(regroup ? 1.0 : 0.0);
}

bool GradientBuckets::RegroupVoted() {
  return ExtraSlot(kRegroupSlot).item<float>() > 0;
}

void GradientBuckets::OnGradientReady(int param) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!syncing_) return;
  ready_[param] = 1;
  LaunchReadyLocked(/*flush=*/false);
}

void GradientBuckets::LaunchChunkLocked(Bucket& bucket, int64_t end) {
  torch::NoGradGuard no_grad;
  torch::Tensor chunk = bucket.buffer.narrow(0, bucket.launched, end - bucket.launched);
  chunk.div_(world_size_);
  std::vector<torch::Tensor> tensors{chunk};
  bucket.works.push_back(group_->allreduce(tensors));
  bucket.launched = end;
}

void GradientBuckets::LaunchReadyLocked(bool flush) {
  while (next_launch_ < num_buckets()) {
    Bucket& bucket = buckets_[next_launch_];
    // Early chunks of at least 1 MB and a quarter of the bucket: enough to
    // start a large early gradient, few enough that per-call cost stays low.
    const int64_t min_chunk = std::max<int64_t>(kFirstBucketBytes / 4,
                                                bucket.buffer.numel() / 4);
    const int n = static_cast<int>(bucket.params.size());
    while (bucket.ready_prefix < n &&
           (flush || ready_[bucket.params[bucket.ready_prefix]])) {
      ++bucket.ready_prefix;
    }
    if (bucket.ready_prefix < n) {
      const int64_t ready_end = bucket.ready_prefix == 0
                                    ? 0
                                    : bucket.ends[bucket.ready_prefix - 1];
      if (ready_end - bucket.launched >= min_chunk) {
        LaunchChunkLocked(bucket, ready_end);
      }
      return;  // later buckets wait for this one
    }
    LaunchChunkLocked(bucket, bucket.buffer.numel());  // incl. the extra slots
    ++next_launch_;
  }
}

torch::Tensor GradientBuckets::Finish() {
  const auto loss = [this] { return ExtraSlot(kLossSlot).clone(); };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!syncing_) return loss();
    // Parameters that got no gradient this step never fired their hook.
    LaunchReadyLocked(/*flush=*/true);
  }
  for (auto& bucket : buckets_) {
    for (auto& work : bucket.works) WaitForCollective(*work);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    syncing_ = false;
  }
  return loss();
}

}  // namespace trainctl::train
