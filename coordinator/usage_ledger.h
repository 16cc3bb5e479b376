#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace trainctl::coordinator {

// Each user's recent use of the cluster for fair share: slot-hours, every
// one of which counts half as much after each half-life. Charging an
// interval integrates the decay over it exactly, so the standing does not
// depend on how often it is charged. Times are Unix ms; a time before the
// last one charged counts as that one (a clock stepped back). Not
// thread-safe (the JobManager holds it under its mutex).
class UsageLedger {
 public:
  explicit UsageLedger(double half_life_hours);

  // From `now_ms` on, decay at the new rate; the values stay what they are.
  void SetHalfLife(double half_life_hours, int64_t now_ms);
  // `slots` held by `user` from `from_ms` to `to_ms`, seen at `now_ms`
  // (to_ms <= now_ms).
  void Charge(const std::string& user, int slots, int64_t from_ms,
              int64_t to_ms, int64_t now_ms);
  // Every user's decayed slot-hours at `now_ms` (users whose usage has
  // decayed to nothing are dropped).
  std::map<std::string, double> At(int64_t now_ms);

 private:
  void Advance(int64_t now_ms);
  double Decay(int64_t age_ms) const;

  double half_life_ms_;
  int64_t as_of_ms_ = 0;  // the values below are as of this time
  std::map<std::string, double> slot_hours_;
};

}  // namespace trainctl::coordinator
