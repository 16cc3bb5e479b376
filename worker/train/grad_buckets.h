#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "worker/train/torch_compat.h"

namespace trainctl::train {

// DDP-style gradient averaging that overlaps communication with backward.
//
// Parameters are grouped, in reverse order (roughly the order backward
// produces their gradients), into flat buckets that close once they reach
// `bucket_bytes` (the first one at 1 MiB, so communication starts early),
// each with the parameter that crossed the cap, as in DDP. Each parameter's .grad
// is a view into its bucket, so autograd accumulates straight into the
// buffer and nothing is copied. A hook after each parameter's gradient
// accumulation marks it ready; as soon as a bucket's ready prefix holds at
// least max(1 MB, a quarter of the bucket) not yet sent (or the bucket is
// complete), that chunk is divided
// by the world size and all-reduced asynchronously while backward goes on.
// A large layer whose gradient is ready early (a CNN's dense layer) thus
// travels while the convolutions still compute, whatever the bucket size.
// Buckets, and chunks within a bucket, launch strictly in order: autograd
// on a given graph fires the hooks in the same order on every rank, so every
// rank issues the same collectives in the same order. Two extra slots at
// the end of the last bucket carry the step's loss and the rank's vote to
// stop (a checkpoint-and-stop request, preemption), so neither costs a
// collective of its own, and every rank sees the same votes after the same
// step.
//
// Per optimizer step: ZeroGrad(); for each micro-batch forward, then
// SetSyncing(last micro-batch) and, on the last, SetLoss(); backward; then
// Finish() waits for what is still in flight. Use zero_grad of this class,
// never the optimizer's (it would detach the views). Not thread-safe beyond
// the autograd hooks it installs; one per rank.
class GradientBuckets {
 public:
  GradientBuckets(std::vector<torch::Tensor> params,
                  GroupPtr group, int world_size,
                  int64_t bucket_bytes);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  void ZeroGrad();
  // Whether the coming backward should launch collectives (false on the
  // non-final micro-batches of gradient accumulation, and for local SGD).
  void SetSyncing(bool syncing);
  // The local loss (a one-element tensor on the parameters' device, so
  // that setting it costs no copy to the host) to average with the
  // gradients.
  void SetLoss(const torch::Tensor& local_loss);
  // Whether this rank asks to stop after this step; set with the loss.
  void SetStopVote(bool stop);
  // After Finish: whether any rank voted to stop (with syncing off, this
  // rank's own vote). Reads one value from the device.
  bool StopVoted();
  // The same for leaving the group at the end of this step (an elastic
  // job growing in place).
  void SetRegroupVote(bool regroup);
  bool RegroupVoted();
  // Launches buckets not launched yet (unused parameters), waits for all,
  // and returns the mean loss over the ranks, still on the device. The
  // time spent here is the communication backward did not hide.
  torch::Tensor Finish();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  int64_t bucket_elements(int i) const { return buckets_[i].buffer.numel(); }

 private:
  struct Bucket {
    torch::Tensor buffer;
    std::vector<int> params;      // parameter indices, in buffer order
    std::vector<int64_t> ends;    // buffer offset where each one ends
    int ready_prefix = 0;         // leading params whose gradient is ready
    int64_t launched = 0;         // elements already sent
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
  };

  static constexpr int kLossSlot = 0, kStopSlot = 1, kRegroupSlot = 2, kExtraSlots = 3;
  // One of the extra slots at the end of the last bucket.
  torch::Tensor ExtraSlot(int slot);
  void OnGradientReady(int param);
  // Sends what is ready, in order; `flush` sends every bucket whole.
  void LaunchReadyLocked(bool flush);
  void LaunchChunkLocked(Bucket& bucket, int64_t end);

  std::vector<torch::Tensor> params_;
  GroupPtr group_;
  int world_size_;
  std::vector<Bucket> buckets_;
  // Keeps the AccumulateGrad nodes (and so the hooks) alive.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  // Hooks outlive this object inside autograd; they check this flag.
  std::shared_ptr<bool> alive_;
  std::mutex mu_;
  std::vector<int> bucket_of_;       // parameter -> bucket
  std::vector<char> ready_;          // GUARDED_BY(mu_), per parameter
  bool syncing_ = false;             // GUARDED_BY(mu_)
  int next_launch_ = 0;              // GUARDED_BY(mu_): bucket being sent
};

}  // namespace trainctl::train
