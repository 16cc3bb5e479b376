#pragma once

// Holds one call inside a fake store until the test releases it, as a
// slow commit does: the test arms it, waits until a call is held, checks
// what goes on meanwhile, then releases it. Shared by the store fakes of
// store_writer_test and job_manager_hardening_test.

#include <condition_variable>
#include <mutex>

namespace trainctl::coordinator {

class WriteGate {
 public:
  // The next Pass() blocks until Release().
  void HoldNext() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_next_ = true;
  }
  void WaitUntilHolding() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return holding_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = false;
    changed_.notify_all();
  }
  // Called by the fake store inside the call being held.
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!hold_next_) return;
    hold_next_ = false;
    holding_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return !holding_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool hold_next_ = false, holding_ = false;
};

}  // namespace trainctl::coordinator
