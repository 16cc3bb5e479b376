#include "worker/train/stream_timer.h"

#include <utility>
#include <vector>

#ifdef TRAINCTL_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace trainctl::train {

#ifdef TRAINCTL_WITH_CUDA
struct StreamTimer::DeviceSpans {
  using Event = std::unique_ptr<at::cuda::CUDAEvent>;
  std::vector<std::pair<Event, Event>> pending;
  double seconds = 0;

  static Event NewEvent() {
    return std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
  }
  // Adds up the spans the stream has passed, oldest first.
  void Fold(bool wait) {
    size_t done = 0;
    for (auto& [start, stop] : pending) {
      if (wait) {
        stop->synchronize();
      } else if (!stop->query()) {
        break;
      }
      seconds += start->elapsed_time(*stop) / 1000.0;
      ++done;
    }
    pending.erase(pending.begin(), pending.begin() + done);
  }
};
#else
struct StreamTimer::DeviceSpans {};
#endif

StreamTimer::StreamTimer(const torch::Device& device) {
#ifdef TRAINCTL_WITH_CUDA
  if (device.is_cuda()) device_ = std::make_unique<DeviceSpans>();
#else
  (void)device;
#endif
}

StreamTimer::~StreamTimer() = default;

void StreamTimer::Start() {
#ifdef TRAINCTL_WITH_CUDA
  if (device_) {
    device_->pending.emplace_back(DeviceSpans::NewEvent(), DeviceSpans::NewEvent());
    device_->pending.back().first->record();
    return;
  }
#endif
  started_ = std::chrono::steady_clock::now();
}

void StreamTimer::Stop() {
#ifdef TRAINCTL_WITH_CUDA
  if (device_) {
    device_->pending.back().second->record();
    // Long logging windows: fold what has finished, keep a few events.
    if (device_->pending.size() > 32) device_->Fold(/*wait=*/false);
    return;
  }
#endif
  host_seconds_ += std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - started_)
                       .count();
}

double StreamTimer::TakeSeconds() {
#ifdef TRAINCTL_WITH_CUDA
  if (device_) {
    device_->Fold(/*wait=*/true);
    return std::exchange(device_->seconds, 0.0);
  }
#endif
  return std::exchange(host_seconds_, 0.0);
}

}  // namespace trainctl::train
