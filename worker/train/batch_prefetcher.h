#pragma once

#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "worker/train/data/dataset.h"
#include "worker/train/data/image_transforms.h"

namespace trainctl::train {

// Which micro-batches a rank trains on, in order: optimizer step t is epoch
// t / steps_per_epoch, and its micro-batch m is window
// (t % steps_per_epoch) * grad_accum + m of that epoch's permutation.
struct BatchPlan {
  uint64_t seed = 0;
  int64_t steps_per_epoch = 0;
  int64_t grad_accum = 1;
  int64_t micro_batch = 0;  // global
  int64_t first_step = 0;   // resume: steps before it were trained already
  int64_t total_steps = 0;
  bool keep_indices = false;  // fill Batch::indices (sample-id recording)
  int rank = 0;
  int world_size = 1;
};

// Prepares the rank's micro-batches on a background thread, up to `depth`
// ahead of the training loop, so gathering and moving data overlaps compute
// and communication instead of sitting on the step's critical path. Next()
// is called by one consumer thread; the destructor stops and joins. With
// `transforms`, each batch is augmented (by its samples' ids and epoch) on
// the same thread.
class BatchPrefetcher {
 public:
  BatchPrefetcher(const Dataset& data, BatchPlan plan, torch::Device device,
                  int depth = 2, const ImageTransforms* transforms = nullptr);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next micro-batch in plan order (blocks while it is being prepared).
  // OUT_OF_RANGE after the last; INTERNAL when preparing it threw.
  absl::StatusOr<Batch> Next();

 private:
  void Produce();

  const Dataset& data_;
  const ImageTransforms* const transforms_;
  const BatchPlan plan_;
  const torch::Device device_;
  const size_t depth_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;  // GUARDED_BY(mu_)
  bool done_ = false;        // GUARDED_BY(mu_): producer finished
  bool stop_ = false;        // GUARDED_BY(mu_)
  std::string error_;        // GUARDED_BY(mu_)
  std::thread producer_;
};

}  // namespace trainctl::train
