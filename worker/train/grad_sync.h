#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl::train {

// The rank's collectives other than gradient averaging (GradientBuckets):
// averaging parameters for local SGD through one preallocated flat buffer,
// gathering a few scalars from every rank (evaluation sums, the values each
// rank logs), and the global gradient norm. With a null group (one rank) every call is local.
// Not thread-safe.
class RankCollectives {
 public:
  RankCollectives(std::vector<torch::Tensor> params,
               c10::intrusive_ptr<c10d::ProcessGroup> group, int world_size);

  // Replaces every parameter by its mean over the ranks (local SGD).
  void AverageParameters();
  // Every rank's `mine`, indexed by rank (one small all-gather). Every rank
  // must pass the same number of values.
  std::vector<std::vector<double>> GatherScalars(const std::vector<double>& mine);
  // Global L2 norm of the gradients (after they were averaged).
  double GradientNorm() const;

 private:
  void AllReduceMean(torch::Tensor& buffer);

  std::vector<torch::Tensor> params_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int world_size_;
  torch::Tensor buffer_;
};

// Broadcasts rank 0's values of `tensors` to every rank, in place.
void BroadcastFromRankZero(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                           const std::vector<torch::Tensor>& tensors);

// Rank 0's `mine` on every rank (a checkpoint read by rank 0 only, so the
// file need not be visible to the other nodes). When rank 0 has an error
// instead, every rank returns an error naming it as rank 0's.
absl::StatusOr<std::string> BroadcastBytes(
    const c10::intrusive_ptr<c10d::ProcessGroup>& group, int rank,
    const absl::StatusOr<std::string>& mine);

}  // namespace trainctl::train
