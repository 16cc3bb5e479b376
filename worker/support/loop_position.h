#pragma once

#include <atomic>
#include <cstdint>

#include "common/vocabulary.h"

namespace trainctl::train {

// What a rank is doing, written by its training loop and read by a reporter
// thread that sends it to the agent every second, even while the loop is
// blocked. The coordinator finds a hung rank as one whose progress stops
// changing (coordinator/hang_detector.h). Lock-free; one writer.
class LoopPosition {
 public:
  void BeginStep(int64_t step) {
    step_.store(step, std::memory_order_relaxed);
    Enter(RankPhase::kCompute);
  }
  // Entering the all-reduce phase counts one more collective.
  void Enter(RankPhase phase) {
    if (phase == RankPhase::kAllReduce) {
      collectives_.fetch_add(1, std::memory_order_relaxed);
    }
    phase_.store(static_cast<int>(phase), std::memory_order_release);
  }

  struct Snapshot {
    int64_t step;
    int64_t collectives;
    RankPhase phase;
  };
  Snapshot Read() const {
    return {step_.load(std::memory_order_relaxed),
            collectives_.load(std::memory_order_relaxed),
            static_cast<RankPhase>(phase_.load(std::memory_order_acquire))};
  }

 private:
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> collectives_{0};
  std::atomic<int> phase_{0};
};

}  // namespace trainctl::train
