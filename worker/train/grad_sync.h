#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <vector>

namespace trainctl::train {

// Cross-rank averaging of gradients (data parallelism) and of parameters
// (local SGD) through one preallocated flat buffer, so each is a single
// collective per step with no per-step allocation. Scalars that every rank
// contributes (the step's loss) ride in extra slots at the end of the
// buffer instead of costing their own collective. With a null group (one
// rank) every call is local. Not thread-safe.
class GradientSync {
 public:
  GradientSync(std::vector<torch::Tensor> params,
               c10::intrusive_ptr<c10d::ProcessGroup> group, int world_size,
               int extra_slots);

  // Replaces every parameter's .grad and each of `extras` by its mean over
  // the ranks. Parameters without a gradient count as zero.
  void AverageGradients(std::vector<double>* extras);
  // Replaces every parameter by its mean over the ranks (local SGD).
  void AverageParameters();
  // Means of `values` over the ranks (a small separate collective).
  std::vector<double> AverageScalars(const std::vector<double>& values);
  // Global L2 norm of the gradients (call after AverageGradients).
  double GradientNorm() const;

 private:
  void AllReduceMean(torch::Tensor& buffer);

  std::vector<torch::Tensor> params_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int world_size_;
  int extra_slots_;
  torch::Tensor buffer_;
};

// Broadcasts rank 0's values of `tensors` to every rank, in place.
void BroadcastFromRankZero(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                           const std::vector<torch::Tensor>& tensors);

}  // namespace trainctl::train
