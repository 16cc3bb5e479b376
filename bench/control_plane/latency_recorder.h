#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

namespace trainctl::bench {

// Latency samples in milliseconds from many threads; percentiles at the end.
class LatencyRecorder {
 public:
  void Add(double ms) {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.push_back(ms);
  }
  // The p-th percentile (0..100) by nearest rank; 0 without samples.
  double Percentile(double p) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (samples_.empty()) return 0;
    std::vector<double> sorted = samples_;
    std::sort(sorted.begin(), sorted.end());
    size_t index = static_cast<size_t>(p / 100.0 * sorted.size());
    return sorted[std::min(index, sorted.size() - 1)];
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return samples_.size();
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::vector<double> samples_;
};

}  // namespace trainctl::bench
