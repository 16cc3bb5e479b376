#pragma once

#include <atomic>
#include <cstdint>

namespace trainctl::train {

// What a rank is doing, written by its training loop and read by a reporter
// thread that sends it to the agent every second, even while the loop is
// blocked. The coordinator finds a hung rank as one whose progress stops
// changing (coordinator/hang_detector.h). Lock-free; one writer.
class LoopPosition {
 public:
  enum class Phase : int {
    kStarting = 0,
    kCompute,
    kAllReduce,
    kOptimizer,
    kEvaluation,
    kCheckpoint,
    // In-place recovery: joining the next generation after a peer was lost.
    kRegroup,
  };

  static const char* PhaseName(Phase phase) {
    switch (phase) {
      case Phase::kStarting: return "starting";
      case Phase::kCompute: return "compute";
      case Phase::kAllReduce: return "all-reduce";
      case Phase::kOptimizer: return "optimizer";
      case Phase::kEvaluation: return "evaluation";
      case Phase::kCheckpoint: return "checkpoint";
      case Phase::kRegroup: return "regroup";
    }
    return "unknown";
  }

  void BeginStep(int64_t step) {
    step_.store(step, std::memory_order_relaxed);
    Enter(Phase::kCompute);
  }
  // Entering the all-reduce phase counts one more collective.
  void Enter(Phase phase) {
    if (phase == Phase::kAllReduce) {
      collectives_.fetch_add(1, std::memory_order_relaxed);
    }
    phase_.store(static_cast<int>(phase), std::memory_order_release);
  }

  struct Snapshot {
    int64_t step;
    int64_t collectives;
    Phase phase;
  };
  Snapshot Read() const {
    return {step_.load(std::memory_order_relaxed),
            collectives_.load(std::memory_order_relaxed),
            static_cast<Phase>(phase_.load(std::memory_order_acquire))};
  }

 private:
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> collectives_{0};
  std::atomic<int> phase_{0};
};

}  // namespace trainctl::train
