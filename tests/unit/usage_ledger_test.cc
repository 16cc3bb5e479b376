// Fair-share usage: slot-hours with an exact exponential decay.

#include <gtest/gtest.h>

#include <cmath>

#include "coordinator/usage_ledger.h"

namespace trainctl::coordinator {
namespace {

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kStart = 1'700'000'000'000;

TEST(UsageLedgerTest, SlotHoursWithoutDecayOverAShortSpan) {
  UsageLedger ledger(/*half_life_hours=*/1e6);
  ledger.Charge("alice", 4, kStart, kStart + 2 * kHour, kStart + 2 * kHour);
  EXPECT_NEAR(ledger.At(kStart + 2 * kHour).at("alice"), 8.0, 1e-4);
  EXPECT_EQ(ledger.At(kStart + 2 * kHour).count("bob"), 0u);
}

TEST(UsageLedgerTest, HalvesEachHalfLife) {
  UsageLedger ledger(1);
  ledger.Charge("alice", 1, kStart, kStart + kHour, kStart + kHour);
  // 1 slot for 1 hour decaying with a 1-hour half-life: 1/(2 ln 2).
  const double fresh = ledger.At(kStart + kHour).at("alice");
  EXPECT_NEAR(fresh, 1 / (2 * std::log(2.0)), 1e-9);
  EXPECT_NEAR(ledger.At(kStart + 2 * kHour).at("alice"), fresh / 2, 1e-9);
  EXPECT_NEAR(ledger.At(kStart + 4 * kHour).at("alice"), fresh / 8, 1e-9);
}

TEST(UsageLedgerTest, ChargingInPiecesEqualsChargingOnce) {
  UsageLedger once(24), pieces(24);
  once.Charge("u", 3, kStart, kStart + 10 * kHour, kStart + 10 * kHour);
  for (int h = 0; h < 10; ++h) {
    pieces.Charge("u", 3, kStart + h * kHour, kStart + (h + 1) * kHour,
                  kStart + (h + 1) * kHour);
  }
  EXPECT_NEAR(once.At(kStart + 11 * kHour).at("u"),
              pieces.At(kStart + 11 * kHour).at("u"), 1e-9);
}

TEST(UsageLedgerTest, ANewHalfLifeKeepsTheValuesAndDecaysAtTheNewRate) {
  UsageLedger ledger(1);
  ledger.Charge("u", 1, kStart, kStart + kHour, kStart + kHour);
  const double now = ledger.At(kStart + kHour).at("u");
  ledger.SetHalfLife(2, kStart + kHour);
  EXPECT_NEAR(ledger.At(kStart + 3 * kHour).at("u"), now / 2, 1e-9);
}

TEST(UsageLedgerTest, AClockSteppedBackChargesNothingBackwards) {
  UsageLedger ledger(24);
  ledger.Charge("u", 2, kStart, kStart + kHour, kStart + kHour);
  const double before = ledger.At(kStart + kHour).at("u");
  ledger.Charge("u", 2, kStart + kHour, kStart, kStart);  // empty interval
  EXPECT_DOUBLE_EQ(ledger.At(kStart).at("u"), before);
}

TEST(UsageLedgerTest, UsageThatDecayedToNothingIsDropped) {
  UsageLedger ledger(1);
  ledger.Charge("u", 1, kStart, kStart + 1000, kStart + 1000);
  EXPECT_EQ(ledger.At(kStart + 100 * kHour).count("u"), 0u);
}

}  // namespace
}  // namespace trainctl::coordinator
