#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>

namespace trainctl::train {

// Time the training loop spends waiting for communication, measured where
// the waiting happens. On the CPU a host clock: Gloo's wait blocks the
// host. On a GPU CUDA events on the rank's stream: NCCL's wait only makes
// the stream wait and returns at once, so a host clock around it reads
// nothing. Spans are added up when read (at log steps), so the loop never
// stops to wait for the GPU in order to measure. Not thread-safe.
class StreamTimer {
 public:
  explicit StreamTimer(const torch::Device& device);
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  void Start();
  void Stop();
  // Seconds inside Start/Stop spans since the last call. On a GPU it waits
  // for the stream to pass the last Stop.
  double TakeSeconds();

 private:
  struct DeviceSpans;  // CUDA events, in a CUDA build
  std::unique_ptr<DeviceSpans> device_;
  std::chrono::steady_clock::time_point started_;
  double host_seconds_ = 0;
};

}  // namespace trainctl::train
