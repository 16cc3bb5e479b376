#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/train/torch_compat.h"

namespace trainctl::train {

// The rank's collectives other than gradient averaging (GradientBuckets):
// averaging parameters for local SGD through one preallocated flat buffer,
// gathering a few scalars from every rank (evaluation sums, the values each
// rank logs), and the global gradient norm. With a null group (one rank) every call is local.
// Not thread-safe.
class RankCollectives {
 public:
  RankCollectives(std::vector<torch::Tensor> params,
               GroupPtr group, int world_size);

  // Replaces every parameter by its mean over the ranks (local SGD).
  void AverageParameters();
  // Every rank's `mine`, indexed by rank (one small all-gather). Every rank
  // must pass the same number of values.
  std::vector<std::vector<double>> GatherScalars(const std::vector<double>& mine);
  // Global L2 norm of the gradients (after they were averaged), as a float64
  // scalar on their device: reading it is the caller's one copy to the host.
  torch::Tensor GradientNorm() const;
  // Scales the gradients by max_norm / norm when norm is finite and above
  // max_norm, without leaving the device.
  void ClipGradients(const torch::Tensor& norm, double max_norm);

 private:
  void AllReduceMean(torch::Tensor& buffer);

  std::vector<torch::Tensor> params_;
  GroupPtr group_;
  int world_size_;
  torch::Tensor buffer_;
};

// Broadcasts rank 0's values of `tensors` to every rank, in place.
void BroadcastFromRankZero(const GroupPtr& group,
                           const std::vector<torch::Tensor>& tensors);

// Rank `root`'s `mine` on every rank (a checkpoint read by rank 0 only, so
// the file need not be visible to the other nodes; a survivor's state in
// an in-place recovery). When the root has an error instead, every rank
// returns an error naming it as the root's.
// The bytes travel in tensors on `device`: NCCL moves only GPU tensors.
// From kBytesByAllReduce up, as an all-reduce (faster for large states).
inline constexpr int64_t kBytesByAllReduce = int64_t{4} << 20;
absl::StatusOr<std::string> BroadcastBytes(
    const GroupPtr& group, int rank, const torch::Device& device,
    const absl::StatusOr<std::string>& mine, int root = 0);

}  // namespace trainctl::train
