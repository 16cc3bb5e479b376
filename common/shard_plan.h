#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace trainctl {

// The data shard plan: pure functions, identical on every rank and on the
// coordinator, so no index lists ever travel over the network.
//
// Each epoch visits the training set in an order derived only from
// (seed, epoch). Step s of the epoch takes order positions [s*B, (s+1)*B)
// for global batch B, and rank r of W takes the r-th of the W equal slices
// of that window. The last partial window of an epoch is dropped, so every
// rank has the same number of equal-sized steps.

// Which visiting order a checkpoint's cursor refers to: 1 was an n-element
// Fisher-Yates table, 2 is EpochOrder. Bump it whenever the order a
// (seed, epoch, n) gives changes.
inline constexpr int kEpochOrderVersion = 2;

// One epoch's visiting order: a seeded bijection on [0, n) evaluated one
// position at a time, so no n-element table exists in any process and n
// can be 10^10 or more. It is a keyed Feistel network on the smallest
// even-bit domain holding n (under 4n), walked back into [0, n) by cycle
// walking (expected under 4 rounds of the network per lookup). Only
// fixed-width integer arithmetic: the same order on every platform.
class EpochOrder {
 public:
  // n >= 0; with n == 0 there is no position to ask for.
  EpochOrder(uint64_t seed, int64_t epoch, int64_t n);

  int64_t size() const { return n_; }
  // The sample visited at `position`, for position in [0, n).
  int64_t At(int64_t position) const;
  // The position at which `sample` is visited: At's inverse.
  int64_t PositionOf(int64_t sample) const;

 private:
  static constexpr int kRounds = 6;
  uint64_t Encrypt(uint64_t x) const;
  uint64_t Decrypt(uint64_t x) const;
  uint64_t Round(int round, uint64_t half) const;

  int64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  std::array<uint64_t, kRounds> keys_;
};

// Number of full global batches in one epoch of n samples.
inline int64_t StepsPerEpoch(int64_t n, int64_t global_batch) {
  return global_batch > 0 ? n / global_batch : 0;
}

// Sample indices that `rank` of `world` trains on at `step_in_epoch`.
std::vector<int64_t> RankBatchIndices(const EpochOrder& order,
                                      int64_t step_in_epoch,
                                      int64_t global_batch, int rank,
                                      int world);

// Contiguous, non-overlapping slice [begin, end) of an n-sample evaluation
// set for `rank`; the slices cover every sample exactly once, no padding.
struct Range {
  int64_t begin;
  int64_t end;
};
Range EvalSlice(int64_t n, int rank, int world);

}  // namespace trainctl
