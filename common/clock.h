#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace trainctl {

// Source of wall-clock time. Injected everywhere time matters (leases,
// timestamps) so tests advance time instead of sleeping. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowUnixMs() const = 0;
};

class RealClock : public Clock {
 public:
  int64_t NowUnixMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// Test clock: time moves only when the test says so.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowUnixMs() const override { return now_.load(); }
  void AdvanceMs(int64_t ms) { now_ += ms; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace trainctl
