#include "coordinator/usage_ledger.h"

#include <algorithm>
#include <cmath>

namespace trainctl::coordinator {
namespace {

constexpr double kMsPerHour = 3'600'000.0;
constexpr double kNegligible = 1e-9;  // slot-hours

}  // namespace

UsageLedger::UsageLedger(double half_life_hours)
    : half_life_ms_(half_life_hours * kMsPerHour) {}

double UsageLedger::Decay(int64_t age_ms) const {
  return std::exp2(-static_cast<double>(std::max<int64_t>(age_ms, 0)) /
                   half_life_ms_);
}

void UsageLedger::Advance(int64_t now_ms) {
  if (now_ms <= as_of_ms_) return;
  const double factor = Decay(now_ms - as_of_ms_);
  for (auto it = slot_hours_.begin(); it != slot_hours_.end();) {
    it->second *= factor;
    it = it->second < kNegligible ? slot_hours_.erase(it) : std::next(it);
  }
  as_of_ms_ = now_ms;
}

void UsageLedger::SetHalfLife(double half_life_hours, int64_t now_ms) {
  Advance(now_ms);
  half_life_ms_ = half_life_hours * kMsPerHour;
}

void UsageLedger::Charge(const std::string& user, int slots, int64_t from_ms,
                         int64_t to_ms, int64_t now_ms) {
  Advance(now_ms);
  const int64_t now = std::max(now_ms, as_of_ms_);
  to_ms = std::min(to_ms, now);
  if (slots <= 0 || to_ms <= from_ms) return;
  // The integral of slots * 2^-(now - t)/h over [from, to], in slot-hours.
  const double ln2 = std::log(2.0);
  const double held = slots * half_life_ms_ / ln2 *
                      (Decay(now - to_ms) - Decay(now - from_ms)) / kMsPerHour;
  slot_hours_[user] += held;
}

std::map<std::string, double> UsageLedger::At(int64_t now_ms) {
  Advance(now_ms);
  return slot_hours_;
}

}  // namespace trainctl::coordinator
