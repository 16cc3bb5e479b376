#include "worker/train/batch_prefetcher.h"

#include <vector>

#include "common/shard_plan.h"

namespace trainctl::train {

BatchPrefetcher::BatchPrefetcher(const Dataset& data, BatchPlan plan,
                                 torch::Device device, int depth,
                                 const ImageTransforms* transforms)
    : data_(data),
      transforms_(transforms),
      plan_(plan),
      device_(device),
      depth_(static_cast<size_t>(std::max(1, depth))),
      producer_([this] { Produce(); }) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  producer_.join();
}

void BatchPrefetcher::Produce() {
  try {
    EpochOrder order(plan_.seed, 0, data_.size());
    int64_t order_epoch = 0;
    for (int64_t step = plan_.first_step; step < plan_.total_steps; ++step) {
      const int64_t epoch = step / plan_.steps_per_epoch;
      const int64_t in_epoch = step % plan_.steps_per_epoch;
      if (epoch != order_epoch) {
        order = EpochOrder(plan_.seed, epoch, data_.size());
        order_epoch = epoch;
      }
      for (int64_t m = 0; m < plan_.grad_accum; ++m) {
        std::vector<int64_t> indices = RankBatchIndices(
            order, in_epoch * plan_.grad_accum + m, plan_.micro_batch,
            plan_.rank, plan_.world_size);
        Batch batch = data_.Gather(indices);
        if (transforms_) batch.inputs = transforms_->Train(batch.inputs, indices, epoch);
        if (plan_.keep_indices) batch.indices = std::move(indices);
        if (device_.is_cuda()) {
          batch.inputs = batch.inputs.pin_memory().to(device_, true);
          batch.targets = batch.targets.pin_memory().to(device_, true);
          for (auto& named : batch.more_inputs) {
            named.second = named.second.pin_memory().to(device_, true);
          }
        }
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait(lock, [&] { return stop_ || ready_.size() < depth_; });
        if (stop_) return;
        ready_.push_back(std::move(batch));
        changed_.notify_all();
      }
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  changed_.notify_all();
}

absl::StatusOr<Batch> BatchPrefetcher::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return !ready_.empty() || done_; });
  if (!ready_.empty()) {
    Batch batch = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
    return batch;
  }
  if (!error_.empty()) {
    return absl::InternalError("preparing a batch failed: " + error_);
  }
  return absl::OutOfRangeError("no batches left in the plan");
}

}  // namespace trainctl::train
